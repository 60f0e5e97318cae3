"""Which SLURM job this process is, and whether a job still runs: run dirs record it (run.json, the run-dir lock,
failure.json) so a resume on another node can take over a cancelled job's lock and the report can find its log.
Before a hydra/launcher=slurm sweep submits: the controller answers, and its request fits a node of its partition
(``fit_request``); while it waits, a job pending for a reason that never clears ends it (``PendingWatch``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gear_repro.utils.errors import ConfigError

ACTIVE_STATES = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "STOPPED",
                 "SIGNALING", "STAGE_OUT"}


def slurm_job() -> dict[str, str] | None:
    """This process's SLURM job (None outside SLURM): ``job_id`` as squeue shows it (``<array>_<task>`` in an
    array), ``raw_id`` (SLURM_JOB_ID) and ``node``."""
    raw = os.environ.get("SLURM_JOB_ID")
    if not raw:
        return None
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return {"job_id": f"{array}_{task}" if array and task else raw, "raw_id": raw,
            "node": os.environ.get("SLURMD_NODENAME", "")}


def job_active(job_id: str) -> bool | None:
    """Whether SLURM still runs (or will run) ``job_id``; None when squeue cannot tell (not installed, no controller)."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return False if "invalid job id" in out.stderr.lower() else None
    return any(state.strip() in ACTIVE_STATES for state in out.stdout.splitlines())


def check_controller() -> None:
    """Before a ``hydra/launcher=slurm`` sweep submits anything: ``sbatch`` on PATH and the controller answering
    ``scontrol ping``; a ConfigError saying which is missing (submitit's 40-line traceback otherwise, and a sweep
    folder without a job)."""
    if shutil.which("sbatch") is None:
        raise ConfigError("hydra/launcher=slurm needs SLURM's sbatch on PATH (run the sweep on a login node of the "
                          "cluster; `make slurm-local` installs a one-node cluster here)")
    if shutil.which("scontrol") is None:
        return  # nothing to ask: sbatch itself will say
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise ConfigError(f"hydra/launcher=slurm: `scontrol ping` did not answer ({e}); is the cluster up?") from None
    said = (out.stdout + out.stderr).strip()
    if out.returncode != 0 or " is UP" not in said:  # a backup controller may be DOWN while the primary is UP
        raise ConfigError(f"hydra/launcher=slurm: the SLURM controller does not answer (`scontrol ping`: "
                          f"{said.splitlines()[-1] if said else f'exit {out.returncode}'}); is the cluster up? "
                          "(`make slurm-local` starts the one-node cluster here)")


# --- What a partition's nodes can ever give a job ------------------------------------------------------------------
# A request larger than every node of its partition is accepted by sbatch and then held pending for ever (squeue
# reason PartitionConfig, or PartitionNodeLimit for too many nodes); a memory request is refused by sbatch. So a
# hydra/launcher=slurm sweep compares its request with `scontrol show partition/node` before submitting.

FITTED = ("cpus_per_task", "mem_gb", "timeout_min")  # launcher settings lowered to fit when not given on the command line
_HELD = {"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "INVAL", "FUTURE"}  # node states only an admin clears
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w/:.]*)=(.*?)(?=\s+[A-Za-z][\w/:.]*=|\s*$)")
_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Node:
    """One node as its partition lets a job use it: CPUs and memory (MiB) capped by the partition's MaxCPUsPerNode
    and MaxMemPerNode, GPUs from its Gres, and its state (``IDLE``, ``IDLE+DRAIN``, ``DOWN*`` ...)."""

    name: str
    cpus: int
    mem_mib: int
    gpus: int
    state: str

    @property
    def held(self) -> bool:
        """Drained or failed: no job starts on it until an administrator resumes it (a DOWN node returns by itself
        once its slurmd answers, with SLURM's ReturnToService)."""
        return bool({f.strip("*~#!%$@^-") for f in self.state.upper().split("+")} & _HELD)

    def describe(self) -> str:
        gpus = f", {self.gpus} GPU(s)" if self.gpus else ""
        return f"{self.name}: {self.cpus} CPUs, {self.mem_mib / 1024:.1f} GiB{gpus}"


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    max_minutes: float | None  # MaxTime (None: UNLIMITED)
    max_nodes: int | None      # MaxNodes (None: UNLIMITED)
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Request:
    """What one job of the sweep asks per node (submitit's sbatch flags from the launcher settings)."""

    nodes: int
    cpus: int
    mem_mib: int | None
    gpus: int
    minutes: float | None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Request:
        tasks = int(params.get("tasks_per_node") or 1)
        cpus = int(params.get("cpus_per_task") or 1) * tasks
        gpus = int(params.get("gpus_per_node") or 0) or int(params.get("gpus_per_task") or 0) * tasks \
            or _gres_gpus(str(params.get("gres") or ""))
        mem = None
        if params.get("mem_gb"):
            mem = int(params["mem_gb"]) * 1024  # submitit passes --mem=<n>GB; SLURM's G is 1024 MiB
        elif params.get("mem_per_cpu"):
            mem = _mib(params["mem_per_cpu"], "hydra.launcher.mem_per_cpu") * cpus
        elif params.get("mem_per_gpu") and gpus:
            mem = _mib(params["mem_per_gpu"], "hydra.launcher.mem_per_gpu") * gpus
        timeout = params.get("timeout_min")
        return cls(nodes=int(params.get("nodes") or 1), cpus=cpus, mem_mib=mem, gpus=gpus,
                   minutes=float(timeout) if timeout else None)

    def shortfalls(self, node: Node) -> list[str]:
        """What ``node`` lacks for one node of this request (``cpus``, ``mem``, ``gpus``; [] when it fits)."""
        return [what for what, asked, has in (("cpus", self.cpus, node.cpus), ("mem", self.mem_mib, node.mem_mib),
                                              ("gpus", self.gpus, node.gpus)) if asked and asked > has]

    def able(self, partition: Partition, *, now: bool = False) -> list[Node]:
        """The partition's nodes that hold one node of this request (``now``: leaving out drained/failed ones)."""
        return [n for n in partition.nodes if not self.shortfalls(n) and not (now and n.held)]


def _mib(value: Any, setting: str) -> int:
    """A SLURM memory size (``4G``, ``500M``, ``2048``: MiB by default) in MiB."""
    m = _MEM.match(str(value))
    if not m:
        raise ConfigError(f"{setting}={value!r} is not a SLURM memory size (e.g. 4G, 500M)")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def _gres_gpus(gres: str) -> int:
    """GPUs in a Gres string (``gpu:2``, ``gpu:a100:4(S:0-1),gpu:v100:1``; ``(null)``: 0)."""
    total = 0
    for entry in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = entry.strip().split(":")
        if parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def _minutes(value: str) -> float | None:
    """A SLURM time (``UNLIMITED``, ``30``, ``1-00:00:00``, ``12:00:00``, ``2-12``) in minutes."""
    if value.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, clock = value.rpartition("-")
    parts = [float(p) for p in clock.split(":")]
    if days:  # days-hours[:minutes[:seconds]]
        parts += [0.0] * (3 - len(parts))
        return float(days) * 1440 + parts[0] * 60 + parts[1] + parts[2] / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    return parts[0] + (parts[1] / 60 if len(parts) == 2 else 0.0)  # minutes[:seconds]


def _limit(value: str | None) -> int | None:
    return None if value is None or not value.strip().isdigit() else int(value)


def _scontrol_show(what: str) -> list[dict[str, str]] | None:
    """``scontrol -o show <what>`` as one dict of its ``Key=value`` fields per line; None when it cannot answer."""
    if shutil.which("scontrol") is None:
        return None
    try:
        out = subprocess.run(["scontrol", "-o", "show", what], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [dict(_FIELD.findall(line)) for line in out.stdout.splitlines() if "=" in line]


def cluster_partitions() -> dict[str, Partition] | None:
    """Every partition of the cluster with its nodes (``scontrol show partition`` / ``node``); None when scontrol
    cannot answer (then nothing is checked before submitting: sbatch speaks for itself)."""
    parts, nodes = _scontrol_show("partition"), _scontrol_show("node")
    if parts is None or nodes is None:
        return None
    out: dict[str, Partition] = {}
    for p in parts:
        name = p.get("PartitionName", "")
        max_cpus, max_mem = _limit(p.get("MaxCPUsPerNode")), _limit(p.get("MaxMemPerNode"))
        members = []
        for n in nodes:
            if name not in n.get("Partitions", "").split(","):
                continue
            cpus = _limit(n.get("CPUEfctv")) or _limit(n.get("CPUTot")) or 0
            mem = (_limit(n.get("RealMemory")) or 0) - (_limit(n.get("MemSpecLimit")) or 0)
            members.append(Node(name=n.get("NodeName", "?"), cpus=min(cpus, max_cpus or cpus),
                                mem_mib=min(mem, max_mem or mem), gpus=_gres_gpus(n.get("Gres", "")),
                                state=n.get("State", "?")))
        out[name] = Partition(name=name, default=p.get("Default", "").upper() == "YES",
                              max_minutes=_minutes(p.get("MaxTime", "UNLIMITED")),
                              max_nodes=_limit(p.get("MaxNodes")), nodes=tuple(members))
    return out


def _fits(req: Request, part: Partition) -> bool:
    return (len(req.able(part)) >= req.nodes and (part.max_nodes is None or req.nodes <= part.max_nodes)
            and (part.max_minutes is None or req.minutes is None or req.minutes <= part.max_minutes))


def _lowered(params: Mapping[str, Any], node: Node, part: Partition, given: set[str]) -> dict[str, Any]:
    """``params`` with each FITTED setting not in ``given`` lowered to what ``node`` and ``part`` allow."""
    out = dict(params)
    tasks = int(params.get("tasks_per_node") or 1)
    if "cpus_per_task" not in given and params.get("cpus_per_task"):
        out["cpus_per_task"] = max(1, min(int(params["cpus_per_task"]), node.cpus // tasks))
    if "mem_gb" not in given and params.get("mem_gb"):
        out["mem_gb"] = max(1, min(int(params["mem_gb"]), node.mem_mib // 1024))
    if "timeout_min" not in given and params.get("timeout_min") and part.max_minutes is not None:
        out["timeout_min"] = max(1, min(int(params["timeout_min"]), int(part.max_minutes)))
    return out


def _to_lower(params: Mapping[str, Any], part: Partition, given: set[str]) -> list[tuple[str, str]]:
    """The settings to lower for ``params`` to fit ``part`` (the FITTED ones not in ``given`` lowered first):
    measured against its node that lacks the fewest of them, and then the least. Each with the squeue reason SLURM
    would keep the jobs pending for."""
    if not part.nodes:
        return [(f"the request (partition {part.name} has no nodes)", "PartitionConfig")]

    def lack(n: Node) -> tuple[int, float]:
        req = Request.of(_lowered(params, n, part, given))
        asked = {"cpus": (req.cpus, n.cpus), "mem": (req.mem_mib or 0, n.mem_mib), "gpus": (req.gpus, n.gpus)}
        short = req.shortfalls(n)
        return len(short), sum(1 - asked[w][1] / asked[w][0] for w in short)

    node = min(part.nodes, key=lack)
    params = _lowered(params, node, part, given)
    req = Request.of(params)
    tasks = int(params.get("tasks_per_node") or 1)
    lower = []
    for what in req.shortfalls(node):
        if what == "cpus":
            per = f" per task ({tasks} tasks per node)" if tasks > 1 else ""
            lower.append((f"hydra.launcher.cpus_per_task={max(1, node.cpus // tasks)} (asks "
                          f"{params.get('cpus_per_task') or 1}{per}; {node.name} has {node.cpus} CPUs)",
                          "PartitionConfig"))
        elif what == "mem":
            has = f"{node.name} has {node.mem_mib} MiB"
            if params.get("mem_gb"):
                lower.append((f"hydra.launcher.mem_gb={node.mem_mib // 1024} (asks {params['mem_gb']} GiB; {has})",
                              "PartitionConfig"))
            elif params.get("mem_per_cpu"):
                lower.append((f"hydra.launcher.mem_per_cpu={node.mem_mib // req.cpus}M (asks "
                              f"{params['mem_per_cpu']} x {req.cpus} CPUs; {has})", "PartitionConfig"))
            else:
                lower.append((f"hydra.launcher.mem_per_gpu={node.mem_mib // max(req.gpus, 1)}M (asks "
                              f"{params.get('mem_per_gpu')} x {req.gpus} GPUs; {has})", "PartitionConfig"))
        elif what == "gpus":
            lower.append((f"hydra.launcher.gpus_per_node={node.gpus} (asks {req.gpus} GPUs; {node.name} has "
                          f"{node.gpus})", "PartitionConfig"))
    able = len(req.able(part))
    most = min(able, part.max_nodes) if part.max_nodes is not None else able
    if not lower and req.nodes > most:
        lower.append((f"hydra.launcher.nodes={max(most, 1)} (asks {req.nodes} nodes; partition {part.name} has "
                      f"{able} that hold one{'' if part.max_nodes is None else f', MaxNodes={part.max_nodes}'})",
                      "PartitionNodeLimit"))
    if part.max_minutes is not None and req.minutes is not None and req.minutes > part.max_minutes:
        lower.append((f"hydra.launcher.timeout_min={int(part.max_minutes)} (asks {int(req.minutes)}; partition "
                      f"{part.name} has MaxTime {int(part.max_minutes)} min)", "PartitionTimeLimit"))
    return lower


def fit_request(params: Mapping[str, Any], given: set[str],
                partitions: dict[str, Partition] | None = None) -> tuple[dict[str, Any], str]:
    """The launcher settings of a hydra/launcher=slurm sweep checked against the partition it submits to (its
    ``partition``, else the cluster's default; the first of a comma-separated list that can hold it): the FITTED
    settings not in ``given`` (those set on the command line) are lowered to the largest request one node (and
    the partition's MaxTime) can hold. Returns the changed settings ({} when none) and the partition and node they
    were fitted to. A request no node can ever hold (SLURM would keep it pending, reason PartitionConfig) raises
    ConfigError naming the settings to lower and what the node has. Unchecked ({}) when scontrol cannot answer or
    no partition is the default."""
    parts = cluster_partitions() if partitions is None else partitions
    if not parts:
        return {}, ""
    names = [p.strip() for p in str(params.get("partition") or "").split(",") if p.strip()]
    if not names:
        names = [p.name for p in parts.values() if p.default][:1]
        if not names:
            return {}, ""
    unknown = [n for n in names if n not in parts]
    if unknown:
        listed = ", ".join(f"{p.name}{' (default)' if p.default else ''}" for p in parts.values())
        raise ConfigError(f"hydra.launcher.partition={params.get('partition')}: this cluster has no partition "
                          f"{', '.join(unknown)} (partitions: {listed})")
    chosen = [parts[n] for n in names]
    for part in chosen:
        if _fits(Request.of(params), part):
            return {}, part.name
    for part in chosen:
        fitting = [(c, node) for node in part.nodes
                   if _fits(Request.of(c := _lowered(params, node, part, given)), part)]
        if fitting:  # the one nearest the asked values
            best, node = max(fitting, key=lambda cn: sum(cn[0][k] / params[k] for k in FITTED if params.get(k)))
            return ({k: best[k] for k in FITTED if best.get(k) != params.get(k)},
                    f"partition {part.name}, node {node.describe()}")
    lower = {part.name: _to_lower(params, part, given) or [("the request", "PartitionConfig")] for part in chosen}
    why = "; ".join(f"lower {', '.join(text for text, _ in items)} (partition {name}'s nodes: "
                    f"{'; '.join(n.describe() for n in parts[name].nodes[:4]) or 'none'})"
                    for name, items in lower.items())
    reasons = ", ".join(dict.fromkeys(code for items in lower.values() for _, code in items))
    raise ConfigError(f"hydra/launcher=slurm asks more than partition{'s' if len(names) > 1 else ''} "
                      f"{', '.join(names)} can ever give, so SLURM "
                      f"would hold its jobs pending for ever (squeue reason {reasons}): {why}")


# --- Jobs pending for a reason that never clears ---------------------------------------------------------------------
# squeue(1), "JOB REASON CODES". These do not clear by waiting: the request exceeds a partition or per-job limit, or
# names what does not exist. A reason about nodes (ReqNodeNotAvail ...) never clears only when fewer nodes than the
# job asks could ever hold it (too small, or drained/failed until an administrator resumes them).
NEVER_REASONS = {
    "PartitionConfig": "its request exceeds what the partition's nodes or limits allow",
    "PartitionTimeLimit": "its time limit (hydra.launcher.timeout_min) exceeds the partition's MaxTime",
    "BadConstraints": "no node satisfies its constraints",
    "DependencyNeverSatisfied": "a job it depends on failed",
    "InvalidAccount": "its account does not exist or may not be used",
    "InvalidQOS": "its QOS does not exist or may not be used",
}
NODE_REASONS = {"ReqNodeNotAvail", "PartitionNodeLimit", "NodeDown", "Resources"}
_PER_JOB_LIMIT = re.compile(r"^(QOS|Assoc)Max\w*PerJob")  # QOSMaxCpuPerJobLimit, AssocMaxWallDurationPerJobLimit...
PENDING_POLL_S = 5.0  # squeue every 5 s; a reason seen twice in a row ends the sweep
_JOB_DIR = re.compile(r"\d+(_\d+)?")


def never_starts(reason: str, req: Request, partition: Partition | None) -> str | None:
    """Why a job pending for squeue's ``reason`` (``%r``, e.g. ``ReqNodeNotAvail, UnavailableNodes:vm``) can
    never start, or None when waiting may clear it (Priority, Resources on a node that can hold it, ...)."""
    code = reason.split(",")[0].strip()
    if code in NEVER_REASONS:
        return NEVER_REASONS[code]
    if _PER_JOB_LIMIT.match(code):
        return "its request exceeds a per-job limit of its QOS or association (sacctmgr show qos/assoc)"
    if code in NODE_REASONS and partition is not None and len(req.able(partition, now=True)) < req.nodes:
        states = ", ".join(f"{n.name} {n.state}" for n in partition.nodes[:8]) or "no nodes"
        return (f"fewer than the {req.nodes} node(s) it asks of partition {partition.name} can ever run it: too "
                f"small, or drained/failed until an administrator resumes them ({states})")
    return None


def pending(job_ids: list[str]) -> list[tuple[str, str, str]] | None:
    """``(job, partition, reason)`` of each pending entry squeue lists for ``job_ids`` (an array's pending tasks
    are one entry, ``12_[0-3]``); None when squeue cannot answer."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "-t", "PENDING", "-j", ",".join(job_ids), "-o", "%i|%P|%r"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return [] if "invalid job id" in out.stderr.lower() else None  # every job already left the queue
    rows = [line.split("|", 2) for line in out.stdout.splitlines() if line.count("|") >= 2]
    return [(job.strip(), part.strip(), reason.strip()) for job, part, reason in rows]


def submitit_job_ids(root: Path, before: set[str]) -> list[str]:
    """The SLURM jobs (array ids) submitit submitted from ``root`` (the sweep's ``.submitit`` folder, one folder per
    job named ``<job>`` or ``<array>_<task>``) whose folder was not among ``before``."""
    names = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    return sorted({n.split("_")[0] for n in names - before if _JOB_DIR.fullmatch(n)}, key=int)


class PendingWatch(threading.Thread):
    """Polls squeue for the jobs ``job_ids()`` names while a sweep waits for them; a job pending for a reason that
    never clears (``never_starts``), seen on ``confirm`` polls in a row, is cancelled (scancel) and ``message`` set
    (naming the job, the reason and the request); then ``on_stuck()`` is called (in this thread) and it stops."""

    def __init__(self, job_ids: Callable[[], list[str]], params: Mapping[str, Any], on_stuck: Callable[[], None],
                 poll_s: float | None = None, confirm: int = 2) -> None:
        super().__init__(name="gear-slurm-pending", daemon=True)
        self.job_ids, self.params, self.on_stuck = job_ids, dict(params), on_stuck
        self.poll_s, self.confirm = PENDING_POLL_S if poll_s is None else poll_s, confirm
        self.message: str | None = None
        self._stop_event = threading.Event()
        self._seen: dict[str, tuple[str, int]] = {}  # array id -> (reason, polls in a row)
        self._left: set[str] = set()  # jobs no longer pending
        self._partitions: dict[str, Partition] | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.poll_s):
            if self.check():
                self.on_stuck()
                return

    def check(self) -> bool:
        """One poll; True when a job was found stuck (and cancelled)."""
        ids = [j for j in self.job_ids() if j not in self._left]
        rows = pending(ids) if ids else None
        if rows is None:
            return False
        listed = {job.split("_")[0] for job, _, _ in rows}
        self._left |= set(ids) - listed
        req = Request.of(self.params)
        seen: dict[str, tuple[str, int]] = {}
        for job, part_name, reason in rows:
            array = job.split("_")[0]
            partition = None
            if reason.split(",")[0].strip() in NODE_REASONS:
                if self._partitions is None:
                    self._partitions = cluster_partitions() or {}
                partition = self._partitions.get(part_name.split(",")[0])
            why = never_starts(reason, req, partition)
            if why is None:
                continue
            before, times = self._seen.get(array, ("", 0))
            count = times + 1 if before == reason else 1
            seen[array] = (reason, count)
            if count >= self.confirm:
                self._cancel(job, array, part_name, reason, why)
                return True
        self._seen = seen
        self._partitions = None  # node states may change between polls
        return False

    def _cancel(self, job: str, array: str, partition: str, reason: str, why: str) -> None:
        try:
            done = subprocess.run(["scancel", array], capture_output=True, text=True, timeout=60)
            cancelled = (f"cancelled it (scancel {array})" if done.returncode == 0 else
                         f"`scancel {array}` failed ({(done.stderr or done.stdout).strip()}): cancel it by hand")
        except (OSError, subprocess.SubprocessError) as e:
            cancelled = f"`scancel {array}` failed ({e}): cancel it by hand"
        asked = ", ".join(f"{k}={self.params[k]}" for k in ("partition", "nodes", "tasks_per_node", "cpus_per_task",
                                                              "mem_gb", "gpus_per_node", "timeout_min")
                          if self.params.get(k) is not None)
        extra = self.params.get("additional_parameters") or {}
        extra_text = f", additional_parameters={dict(extra)}" if extra else ""
        self.message = (f"SLURM holds job {job} of this sweep pending ({reason}), which waiting never clears: "
                        f"{why}. The sweep stops waiting; {cancelled}. Its request (hydra.launcher.*): {asked}"
                        f"{extra_text}; compare with `scontrol show partition {partition}` and its nodes")
