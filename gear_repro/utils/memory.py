"""The memory a process can still take, for the capacity checks (:mod:`gear_repro.pipeline.capacity` before a run,
a component's build part way): what the machine has available, within the process's memory cgroup (a SLURM job's
``--mem``, a container's limit), and what the process holds already."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from gear_repro.utils.errors import CapacityError

log = logging.getLogger(__name__)

GIB = 1024 ** 3
MARGIN = 1.1  # ask for 10 % more than the estimate


def proc_bytes(path: str, key: str) -> int | None:
    """The ``key:`` line of a /proc file in kB (/proc/meminfo, /proc/self/status), as bytes; None where absent."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def status_gib(key: str) -> float:
    """``key`` of ``/proc/self/status`` now (``RssAnon``: the anonymous resident memory, ``VmRSS``), GiB; nan where
    absent (the memory benches' samples)."""
    found = proc_bytes("/proc/self/status", key)
    return found / GIB if found is not None else float("nan")


def available_memory() -> int:
    """Bytes of memory available to a new process: ``MemAvailable`` of /proc/meminfo (else physical pages), at most
    what the process's memory cgroup still allows (:func:`cgroup_room`: a SLURM job's ``--mem``, a container's
    limit, which /proc/meminfo does not show)."""
    found = proc_bytes("/proc/meminfo", "MemAvailable")
    free = found if found is not None else os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    room = cgroup_room()
    return free if room is None else min(free, room)


NO_LIMIT = 2 ** 60  # cgroup v1 writes "no limit" as a number near 2**63


def cgroup_room(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes this process's memory cgroup and each of its parents still allow: the limit less the usage plus the
    inactive file pages (page cache the kernel reclaims at the limit), the tightest of them; None where no group
    has a limit or the files cannot be read. cgroup v2 (``memory.max``, ``memory.current``) and v1 (the ``memory``
    hierarchy: ``memory.limit_in_bytes``, ``memory.usage_in_bytes``, ``total_inactive_file``); a group path not
    under ``root`` (a container's own namespace) is read from the mount's top."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and not controllers:
            top, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            top, files = root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        group = top / path.strip("/")
        group = group if group.is_dir() else top
        for d in (group, *[p for p in group.parents if p.is_relative_to(top)]):
            if (room := _group_room(d, *files)) is not None:
                rooms.append(room)
    return max(0, min(rooms)) if rooms else None


def _group_room(group: Path, limit_file: str, usage_file: str, inactive_key: str) -> int | None:
    """One cgroup's limit less its usage plus its inactive file pages; None without a limit or its files."""
    try:
        limit = (group / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= NO_LIMIT:
            return None
        usage = int((group / usage_file).read_text())
        inactive = next((int(v) for k, v in (ln.split() for ln in (group / "memory.stat").read_text().splitlines()
                                             if ln.strip()) if k == inactive_key), 0)
    except (OSError, ValueError):
        return None
    return int(limit) - usage + inactive


def process_memory() -> int:
    """Bytes this process holds resident and anonymous now (``RssAnon`` of /proc/self/status; 0 where unknown).
    The estimate is of the whole run's process, which by the check already holds part of it (the interpreter, the
    dataset's records) that ``MemAvailable`` no longer counts."""
    return proc_bytes("/proc/self/status", "RssAnon") or 0


def run_memory() -> int:
    """Bytes of memory this run's process can hold in all: what the machine has available and what the process
    holds already."""
    return available_memory() + process_memory()


def check_build(more: int, what: str, hints: Sequence[str]) -> None:
    """CapacityError when a build, part way, is about to hold ``more`` bytes beyond what its process holds now and
    that (with :data:`MARGIN`) exceeds the memory the process can hold (:func:`run_memory`): a component's own check
    once it knows more than the start-up estimate could (HippoRAG's synonym rate, from its phrase vectors). ``what``
    explains the bytes; ``hints`` are the settings that need less."""
    held = process_memory()
    need, have = held + more, run_memory()
    if need * MARGIN > have:
        raise CapacityError(
            f"not enough memory to go on: {what} needs about {more / GIB:.1f} GiB more, {need / GIB:.1f} GiB in all "
            f"with the {held / GIB:.1f} GiB this process holds, {have / GIB:.1f} GiB available to it. Use "
            + "".join(f"{h}, " for h in hints) + "a machine with more memory, or set run.capacity_check=false to go "
            "on anyway")
    log.info("capacity: %s needs ~%.1f GiB more (%.1f GiB in all, %.1f GiB available)", what, more / GIB,
             need / GIB, have / GIB)
