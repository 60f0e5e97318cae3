"""Sweeps on a real SLURM cluster: hydra/launcher=slurm against the one-node cluster of `make slurm-local`.

The cluster is brought up through `make slurm-local` (root; docs/sweeps.md); when it cannot come up the tests fail with
its output. The sweep is the issue's (`retriever=bm25,sbert expansion=none,naive embedder=minilm`) on N questions with
the mean path scorer (the exact scorer encodes every path: ~30 s per question on 2 busy cores). Corpus embeddings come
from the shared $GEAR_CACHE, as on a cluster; each run writes into its own temporary sweep dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import REPO, RUN, run_cli
from tests.helpers.fake_slurm import FakeSlurm, node, partition
from tests.helpers.requirements import require_module

# Tests that submit to the real cluster are marked slow and slurm (make test, make test-slurm); those that stand
# fake SLURM commands on PATH (tests/helpers/fake_slurm.py) need no cluster and run with the fast tests.

N = 6  # questions per job: the whole module stays within ~3 minutes on 2 busy cores
SWEEP = ["retriever=bm25,sbert", "expansion=none,naive", "embedder=minilm", "beam.scorer=mean", f"dataset.limit={N}",
         "run.progress=false"]
SLURM = ["hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
         "hydra.launcher.timeout_min=20"]
REPORT = "from gear_repro.cli.report import main; raise SystemExit(main())"
CANCELLED = "3_musique_sample_sbert+naive+single"  # the job cancelled mid-run: the last of the array


@pytest.fixture(scope="module")
def cluster() -> None:
    """`make slurm-local` (a no-op when the cluster is up); a cluster that cannot come up fails the test."""
    require_module("hydra_plugins.hydra_submitit_launcher", "make test-deps")
    proc = subprocess.run(["make", "-s", "--no-print-directory", "slurm-local"], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"the SLURM cluster did not come up (make slurm-local exit {proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def _env() -> dict[str, str]:
    """The jobs' environment: sbatch exports the submitter's, so PYTHONPATH makes every job import this checkout."""
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def _gear(args: list[str], log: Path) -> subprocess.Popen:
    """`gear-repro args...` in the background, output to ``log``."""
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-c", RUN, *args], cwd=REPO, env=_env(), stdout=out,
                                stderr=subprocess.STDOUT)


def _report(runs: Path, out: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", REPORT, str(runs), "--out", str(out), "--resamples", "200"],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def _records(run_dir: Path) -> list[dict]:
    """The complete records of a run dir's predictions.jsonl (a line being written is left out)."""
    path = run_dir / "predictions.jsonl"
    out = []
    for line in path.read_text().splitlines(keepends=True) if path.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


def _job(run_dir: Path) -> str:
    """The SLURM job (``<array>_<task>``) that ran ``run_dir`` last (run.json, written before its first question)."""
    return json.loads((run_dir / "run.json").read_text())["environment"]["slurm"]["job_id"]


def _sacct(array: str) -> dict[str, str]:
    """Final state of every task of a SLURM array, from the accounting database (which may lag a few seconds)."""
    end = time.monotonic() + 60
    while True:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", array, "-o", "JobID,State"], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        states = dict(line.split("|")[:2] for line in out.splitlines() if line)
        if states and not {"PENDING", "RUNNING", "COMPLETING"} & set(states.values()) or time.monotonic() > end:
            return states
        time.sleep(1)


def _wait_for_array(array: str, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-j", array], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < end, f"SLURM array {array} still queued after {timeout} s"
        time.sleep(1)


def _cancel_mid_run(run_dir: Path, driver: subprocess.Popen) -> int:
    """Once ``run_dir`` holds its first finished question, `scancel` its SLURM job mid-run; returns how many questions
    it had finished. The job's process (the pid of the run dir's lock) is held stopped from just before the cancel
    until SLURM has killed it: submitit ignores SIGTERM, so a cancelled job runs on for KillWait seconds (and SLURM
    sends SIGCONT first), long enough to finish a few fast questions."""
    end = time.monotonic() + 600
    pid = None
    # the pid is read as soon as the job takes its run dir's lock, not after its first question: on a loaded
    # machine the job could finish every question, and remove the lock, before this process read it
    while pid is None or len(_records(run_dir)) < 1:
        assert driver.poll() is None and time.monotonic() < end, \
            "the job never wrote a question" if pid is not None else "the job's lock was never seen"
        if pid is None:
            with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):  # not taken yet, or being written
                pid = json.loads((run_dir / ".lock").read_text())["pid"]
        time.sleep(0.05)
    os.kill(pid, signal.SIGSTOP)
    done = len(_records(run_dir))
    assert 1 <= done < N, f"the job to cancel finished {done} of {N} questions before it could be stopped"
    subprocess.run(["scancel", _job(run_dir)], check=True, timeout=60)
    end = time.monotonic() + 120
    while time.monotonic() < end:  # until SLURM's SIGKILL: SIGSTOP again after its SIGCONT
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return done
        time.sleep(0.001)
    raise AssertionError(f"SLURM did not kill the cancelled job's process {pid} within 120 s")


def _rankings(sweep: Path) -> dict[str, dict]:
    return {d.name: {r["id"]: r["rankings"] for r in _records(d)} for d in sorted(sweep.iterdir()) if d.is_dir()
            and not d.name.startswith(".")}


def _table(report: Path) -> list[str]:
    """The report's long table without the column naming run dirs (they differ between the two sweeps)."""
    import pandas as pd

    df = pd.read_csv(report / "table.csv")
    return df.drop(columns=[c for c in df.columns if "dir" in c or "path" in c]).to_csv(index=False).splitlines()


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_sweep_equals_local_and_resumes_a_cancelled_job(cluster, tmp_path):
    """The issue's sweep as a SLURM array equals the same sweep run locally (metrics, rankings, report); a job
    cancelled mid-run is listed in the report with SLURM's reason, and a re-submitted sweep skips the finished jobs
    (nothing rewritten) and resumes the cancelled one from its predictions.jsonl (no question twice)."""
    slurm, local = tmp_path / "slurm", tmp_path / "local"
    local_proc = _gear(["-m", *SWEEP, f"hydra.sweep.dir={local}"], tmp_path / "local.log")
    driver = _gear(["-m", *SLURM, *SWEEP, f"hydra.sweep.dir={slurm}"], tmp_path / "slurm1.log")
    done = _cancel_mid_run(slurm / CANCELLED, driver)
    array = _job(slurm / CANCELLED).split("_")[0]
    assert driver.wait(timeout=600) != 0  # the driver reports the cancelled job
    _wait_for_array(array)
    states = _sacct(array)
    assert states == {f"{array}_0": "COMPLETED", f"{array}_1": "COMPLETED", f"{array}_2": "COMPLETED",
                      f"{array}_3": states[f"{array}_3"]} and states[f"{array}_3"].startswith("CANCELLED"), states
    finished = {d.name: ((d / "predictions.jsonl").read_bytes(), (d / "metrics.json").stat().st_mtime_ns)
                for d in slurm.iterdir() if (d / "metrics.json").exists()}
    assert len(finished) == 3 and not (slurm / CANCELLED / "metrics.json").exists()
    partial = _records(slurm / CANCELLED)
    assert done <= len(partial) < N

    rep = _report(slurm, tmp_path / "report_cancelled")
    unfinished = (tmp_path / "report_cancelled" / "failures.md").read_text()
    assert "SBERT + NaiveGE" in unfinished and "CANCELLED" in unfinished, unfinished
    assert "unfinished run(s)" in rep.stderr

    resubmit = _gear(["-m", *SLURM, *SWEEP, f"hydra.sweep.dir={slurm}"], tmp_path / "slurm2.log")
    assert resubmit.wait(timeout=600) == 0, (tmp_path / "slurm2.log").read_text()[-3000:]
    array2 = _job(slurm / CANCELLED).split("_")[0]
    assert array2 != array and set(_sacct(array2).values()) == {"COMPLETED"}
    for name, (preds, mtime) in finished.items():  # skipped: nothing re-run or rewritten
        assert (slurm / name / "predictions.jsonl").read_bytes() == preds
        assert (slurm / name / "metrics.json").stat().st_mtime_ns == mtime
        assert "already finished its" in (slurm / name / "run.log").read_text()
    resumed = _records(slurm / CANCELLED)
    assert [r["id"] for r in resumed] == list(dict.fromkeys(r["id"] for r in resumed)) and len(resumed) == N
    assert resumed[:len(partial)] == partial  # the finished questions were kept, not recomputed
    assert f"{len(partial)} of {N} questions already done" in (slurm / CANCELLED / "run.log").read_text()

    assert local_proc.wait(timeout=600) == 0, (tmp_path / "local.log").read_text()[-3000:]
    assert _rankings(slurm) == _rankings(local) and len(_rankings(local)) == 4
    for d in local.iterdir():
        if d.is_dir():
            ours, theirs = (json.loads((s / d.name / "metrics.json").read_text()) for s in (slurm, local))
            assert {k: v for k, v in ours.items() if k.startswith("recall@")} == \
                   {k: v for k, v in theirs.items() if k.startswith("recall@")}
            assert json.loads((slurm / d.name / "run.json").read_text())["environment"]["code_dir"] == str(REPO)
    _report(local, tmp_path / "report_local")
    _report(slurm, tmp_path / "report_slurm")
    assert _table(tmp_path / "report_slurm") == _table(tmp_path / "report_local")
    assert not (tmp_path / "report_slurm" / "failures.md").exists()


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_failed_jobs_show_their_error_in_the_report(cluster, tmp_path):
    """SBERT jobs whose model folder holds no model (a config.json alone: the start-up check passes and each
    question's load fails) fail both ways a run fails: raising (``run.fail_fast=true``:
    failure.json, no metrics.json) and finishing with errored questions (scored as misses). submitit catches a job's
    exception (sacct: COMPLETED) and the sweep command re-raises it (exit non-zero); the report has the BM25 rows
    and lists both failures with their error."""
    sweep = tmp_path / "sweep"
    (tmp_path / "no_model").mkdir()
    (tmp_path / "no_model" / "config.json").write_text("{}")
    driver = _gear(["-m", *SLURM, "retriever=bm25,sbert", "run.fail_fast=true,false", "embedder=minilm",
                    f"embedder.model={tmp_path / 'no_model'}", "dataset.limit=2", "run.progress=false",
                    f"hydra.sweep.dir={sweep}"], tmp_path / "driver.log")
    assert driver.wait(timeout=600) != 0
    raised, errored = sweep / "2_musique_sample_sbert+none+single", sweep / "3_musique_sample_sbert+none+single"
    array = _job(raised).split("_")[0]
    _wait_for_array(array)
    assert set(_sacct(array).values()) == {"COMPLETED"} and len(_sacct(array)) == 4
    assert "cannot load embedder" in (tmp_path / "driver.log").read_text()  # the first failed job, re-raised
    (result,) = sweep.glob(f".submitit/{array}_3/*_result.pkl")  # Hydra's JobReturn of the erroring job
    job_return = pickle.loads(result.read_bytes())[1]
    assert job_return.status.name == "FAILED" and "2 of 2 questions failed" in str(job_return._return_value)
    failure = json.loads((raised / "failure.json").read_text())
    assert failure["slurm"]["job_id"] == f"{array}_2" and "cannot load embedder" in failure["error"]
    assert not (raised / "metrics.json").exists()
    assert json.loads((errored / "metrics.json").read_text())["n_errors"] == 2
    rep = _report(sweep, tmp_path / "report")
    assert "BM25" in (tmp_path / "report" / "table.md").read_text()
    failures = (tmp_path / "report" / "failures.md").read_text()
    assert failures.count("cannot load embedder") == 2 and str(raised) in failures and str(errored) in failures
    assert "2 of 2" in failures and "cannot load embedder" in rep.stdout


def test_a_sweep_to_a_controller_that_is_down_is_one_line_and_listed_by_the_report(tmp_path, monkeypatch, capsys):
    """sbatch failing on a dead controller was a 40-line submitit traceback, and the sweep folder it left (no job
    dir) vanished from a combined report."""
    import os

    from gear_repro.cli.run import submits_to_slurm
    from gear_repro.reporting.runs import find_unfinished
    from gear_repro.utils.errors import ConfigError
    from gear_repro.utils.slurm import check_controller

    assert submits_to_slurm(["-m", "hydra/launcher=slurm", "retriever=bm25"])
    assert not submits_to_slurm(["hydra/launcher=slurm"]) and not submits_to_slurm(["-m", "retriever=bm25"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("sbatch", "exit 1"),
                       ("scontrol", "echo 'Slurmctld(primary) at vm is DOWN'; exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ConfigError, match=r"the SLURM controller does not answer \(`scontrol ping`: Slurmctld"
                                          r"\(primary\) at vm is DOWN\); is the cluster up\?"):
        check_controller()
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'Slurmctld(primary) at vm is UP'\n")
    check_controller()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="needs SLURM's sbatch on PATH"):
        check_controller()
    sweep = tmp_path / "sweep"
    (sweep / ".submitit").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (unfinished,) = find_unfinished([sweep])
    assert unfinished.path == sweep and "a sweep without a single job dir" in unfinished.error


# --- A request the cluster can never start (fake SLURM commands; no cluster needed) --------------------------------

LAUNCHER = {"partition": None, "nodes": 1, "tasks_per_node": 1, "cpus_per_task": 4, "mem_gb": 32, "gpus_per_node": 0,
            "timeout_min": 720}  # configs/hydra/launcher/slurm.yaml's defaults


def test_the_launcher_defaults_are_lowered_to_the_node_and_a_request_no_node_holds_is_refused(tmp_path, monkeypatch):
    """On the one-node cluster (2 CPUs, 24105 MiB) the defaults (4 CPUs, 32 GiB) were submitted as they are and
    pended for ever (PartitionConfig). Settings not given on the command line are lowered to fit the node; a given
    one that no node holds is refused, naming the value to set."""
    from gear_repro.utils.errors import ConfigError
    from gear_repro.utils.slurm import cluster_partitions, fit_request

    FakeSlurm(tmp_path, monkeypatch)
    (gear,) = cluster_partitions().values()
    assert (gear.name, gear.default, gear.max_minutes, [(n.name, n.cpus, n.mem_mib, n.gpus, n.state)
                                                        for n in gear.nodes]) == ("gear", True, None,
                                                                                 [("vm", 2, 24105, 0, "IDLE")])
    assert fit_request(LAUNCHER, set()) == ({"cpus_per_task": 2, "mem_gb": 23}, "partition gear, node vm: 2 CPUs, "
                                                                                "23.5 GiB")
    assert fit_request({**LAUNCHER, "cpus_per_task": 1, "mem_gb": 4}, set()) == ({}, "gear")
    assert fit_request({**LAUNCHER, "mem_gb": 8}, {"mem_gb"}) == ({"cpus_per_task": 2}, "partition gear, node vm: "
                                                                                         "2 CPUs, 23.5 GiB")
    with pytest.raises(ConfigError) as e:
        fit_request({**LAUNCHER, "cpus_per_task": 8}, {"cpus_per_task"})
    assert str(e.value) == ("hydra/launcher=slurm asks more than partition gear can ever give, so SLURM would hold its "
                            "jobs pending for ever (squeue reason PartitionConfig): lower hydra.launcher.cpus_per_task=2 "
                            "(asks 8; vm has 2 CPUs) (partition gear's nodes: vm: 2 CPUs, 23.5 GiB)")
    with pytest.raises(ConfigError, match=r"lower hydra.launcher.cpus_per_task=2 \(asks 3; vm has 2 CPUs\), "
                                          r"hydra.launcher.mem_gb=23 \(asks 64 GiB; vm has 24105 MiB\)"):
        fit_request({**LAUNCHER, "cpus_per_task": 3, "mem_gb": 64}, {"cpus_per_task", "mem_gb"})
    with pytest.raises(ConfigError, match=r"\(squeue reason PartitionNodeLimit\): lower hydra.launcher.nodes=1 "
                                          r"\(asks 2 nodes; partition gear has 1 that hold one\)"):
        fit_request({**LAUNCHER, "nodes": 2}, {"nodes"})
    with pytest.raises(ConfigError, match=r"^hydra.launcher.partition=cpu: this cluster has no partition cpu "
                                          r"\(partitions: gear \(default\)\)$"):
        fit_request({**LAUNCHER, "partition": "cpu"}, {"partition"})


def test_the_request_is_checked_against_every_node_and_the_partition_limits(tmp_path, monkeypatch):
    """Several nodes, MaxTime, GPUs (Gres) and memory per CPU: the defaults are lowered to the node that keeps them
    nearest; a given time limit over MaxTime, or more GPUs than a node has, is refused."""
    from gear_repro.utils.errors import ConfigError
    from gear_repro.utils.slurm import cluster_partitions, fit_request

    FakeSlurm(tmp_path, monkeypatch, partitions=(partition("short", default=True, max_time="04:00:00"),
                                                 partition("gpu", max_time="2-00:00:00", max_nodes="1")),
              nodes=(node("n1", 64, 8192, partitions="short"), node("n2", 2, 262144, "MIXED", partitions="short"),
                     node("g1", 32, 512000, partitions="gpu", gres="gpu:a100:4(S:0-1)")))
    parts = cluster_partitions()
    assert (parts["short"].max_minutes, parts["gpu"].max_minutes, parts["gpu"].max_nodes) == (240, 2880, 1)
    assert [n.gpus for n in parts["gpu"].nodes] == [4]
    # n1 keeps 4 CPUs but 8 GiB, n2 2 CPUs and 32 GiB: n2 is nearer the asked 4 CPUs + 32 GiB (0.5 + 1 > 1 + 0.25)
    assert fit_request(LAUNCHER, set()) == ({"cpus_per_task": 2, "timeout_min": 240},
                                            "partition short, node n2: 2 CPUs, 256.0 GiB")
    assert fit_request({**LAUNCHER, "cpus_per_task": 16}, {"cpus_per_task"}) == (
        {"mem_gb": 8, "timeout_min": 240}, "partition short, node n1: 64 CPUs, 8.0 GiB")
    with pytest.raises(ConfigError, match=r"\(squeue reason PartitionTimeLimit\): lower hydra.launcher.timeout_min=240 "
                                          r"\(asks 720; partition short has MaxTime 240 min\)"):
        fit_request(LAUNCHER, {"timeout_min"})
    assert fit_request({**LAUNCHER, "partition": "gpu", "gpus_per_node": 2}, {"gpus_per_node"}) == ({}, "gpu")
    with pytest.raises(ConfigError, match=r"lower hydra.launcher.gpus_per_node=4 \(asks 8 GPUs; g1 has 4\)"):
        fit_request({**LAUNCHER, "partition": "gpu", "gpus_per_node": 8}, {"gpus_per_node"})
    with pytest.raises(ConfigError, match=r"lower hydra.launcher.mem_per_cpu=131072M \(asks 200G x 2 CPUs; n2 has "
                                          r"262144 MiB\)"):
        fit_request({**LAUNCHER, "cpus_per_task": 2, "mem_gb": None, "mem_per_cpu": "200G"},
                    {"cpus_per_task", "mem_gb", "mem_per_cpu"})
    # a list: the first partition that holds the request as asked, else the first that holds it lowered
    assert fit_request({**LAUNCHER, "partition": "short,gpu", "cpus_per_task": 32}, {"cpus_per_task"}) == ({}, "gpu")
    assert fit_request({**LAUNCHER, "partition": "gpu,short"}, set()) == ({}, "gpu")
    with pytest.raises(ConfigError, match=r"partitions short, gpu can ever give.*timeout_min=240 \(asks 6000;.*"
                                          r"timeout_min=2880 \(asks 6000; partition gpu has MaxTime 2880 min\)"):
        fit_request({**LAUNCHER, "partition": "short,gpu", "timeout_min": 6000}, {"timeout_min"})
    with pytest.raises(ConfigError, match="not a SLURM memory size"):
        fit_request({**LAUNCHER, "mem_gb": None, "mem_per_cpu": "lots"}, set())


def test_pending_reasons_that_never_clear_are_told_from_those_that_do():
    """squeue's reasons (squeue(1), JOB REASON CODES): PartitionConfig or a per-job QOS limit never clear;
    Priority, Resources or a per-user limit do; a node reason never clears only when no node could ever run it."""
    from gear_repro.utils.slurm import Node, Partition, Request, never_starts

    req = Request.of({**LAUNCHER, "cpus_per_task": 2, "mem_gb": 8})
    up = Partition("gear", True, None, None, (Node("vm", 2, 24105, 0, "IDLE"),))
    drained = Partition("gear", True, None, None, (Node("vm", 2, 24105, 0, "IDLE+DRAIN"),))
    down = Partition("gear", True, None, None, (Node("vm", 2, 24105, 0, "DOWN*"),))
    assert never_starts("PartitionConfig", req, up) == "its request exceeds what the partition's nodes or limits allow"
    assert "MaxTime" in never_starts("PartitionTimeLimit", req, None)
    assert "per-job limit" in never_starts("QOSMaxWallDurationPerJobLimit", req, up)
    for reason in ("Priority", "Resources", "QOSMaxCpuPerUserLimit", "AssocGrpCpuLimit", "None", "BeginTime"):
        assert never_starts(reason, req, up) is None, reason
    assert never_starts("ReqNodeNotAvail, UnavailableNodes:vm", req, up) is None
    assert never_starts("ReqNodeNotAvail, UnavailableNodes:vm", req, down) is None  # returns once its slurmd answers
    assert never_starts("ReqNodeNotAvail, UnavailableNodes:vm", req, drained) == (
        "fewer than the 1 node(s) it asks of partition gear can ever run it: too small, or drained/failed until an "
        "administrator resumes them (vm IDLE+DRAIN)")
    assert never_starts("Resources", Request.of({**LAUNCHER, "cpus_per_task": 3}), up) is not None
    assert never_starts("ReqNodeNotAvail", req, None) is None  # the partition unknown: keep waiting


def test_a_job_pending_for_ever_is_cancelled_once_seen_twice(tmp_path, monkeypatch):
    """The watch polls squeue for the sweep's jobs: a never-clearing reason seen on two polls in a row cancels the
    array (scancel <array>) and names job, reason and request; a clearing reason, or a reason seen once, does not;
    a job that left the queue is not asked about again."""
    import threading

    from gear_repro.utils.slurm import PendingWatch, submitit_job_ids

    fake = FakeSlurm(tmp_path, monkeypatch)
    params = {**LAUNCHER, "cpus_per_task": 2, "mem_gb": 23}
    watch = PendingWatch(lambda: ["41"], params, on_stuck=lambda: None, poll_s=0.01)
    fake.queue("41_[0-1%2]|gear|Priority")
    assert not watch.check() and not watch.check()
    fake.queue("41_[0-1%2]|gear|PartitionConfig")
    assert not watch.check()
    fake.queue("41_[0-1%2]|gear|Priority")
    assert not watch.check()
    fake.queue("41_[0-1%2]|gear|PartitionConfig")
    assert not watch.check() and fake.calls("scancel") == []
    assert watch.check()
    assert fake.calls("scancel") == ["41"]
    assert fake.calls("squeue")[-1] == "-h -t PENDING -j 41 -o %i|%P|%r"
    assert watch.message == (
        "SLURM holds job 41_[0-1%2] of this sweep pending (PartitionConfig), which waiting never clears: its request "
        "exceeds what the partition's nodes or limits allow. The sweep stops waiting; cancelled it (scancel 41). Its "
        "request (hydra.launcher.*): nodes=1, tasks_per_node=1, cpus_per_task=2, mem_gb=23, gpus_per_node=0, "
        "timeout_min=720; compare with `scontrol show partition gear` and its nodes")

    (tmp_path / "squeue.err").write_text("slurm_load_jobs error: Invalid job id specified\n")
    left = PendingWatch(lambda: ["41"], params, on_stuck=lambda: None)
    assert not left.check() and not left.check()
    assert fake.calls("squeue").count("-h -t PENDING -j 41 -o %i|%P|%r") == 7  # 6 polls above + 1: the second asked nothing
    (tmp_path / "squeue.err").unlink()

    stuck = threading.Event()  # the thread: polls until stuck, then calls on_stuck once
    fake.queue("42|gear|InvalidQOS")
    thread = PendingWatch(lambda: ["42"], params, on_stuck=stuck.set, poll_s=0.01)
    thread.start()
    assert stuck.wait(10) and "pending (InvalidQOS)" in thread.message
    thread.join(5)
    assert not thread.is_alive() and fake.calls("scancel") == ["41", "42"]

    root = tmp_path / ".submitit"
    for name in ("7_0", "7_1", "12_0", "12_1", "13", "tmp_a1b2", "3x"):
        (root / name).mkdir(parents=True)
    assert submitit_job_ids(root, {"7_0", "7_1"}) == ["12", "13"]
    assert submitit_job_ids(tmp_path / "none", set()) == []


def test_a_sweep_no_node_can_run_is_refused_before_submitting(tmp_path, monkeypatch):
    """`gear-repro -m hydra/launcher=slurm hydra.launcher.cpus_per_task=8 ...` on a 2-CPU node: exit 2 with one line
    naming the setting to lower, and nothing submitted (before: sbatch, then a job pending for ever)."""
    fake = FakeSlurm(tmp_path, monkeypatch)
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=8", "retriever=bm25",
                    "dataset.limit=1", f"hydra.sweep.dir={sweep}"], tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: hydra/launcher=slurm asks more than partition gear can ever give, so SLURM would hold its jobs pending "
        "for ever (squeue reason PartitionConfig): lower hydra.launcher.cpus_per_task=2 (asks 8; vm has 2 CPUs) "
        "(partition gear's nodes: vm: 2 CPUs, 23.5 GiB)")
    assert fake.calls("sbatch") == [] and not (sweep / ".submitit").exists()


def test_a_sweep_whose_jobs_pend_for_ever_ends_with_the_reason(tmp_path, monkeypatch):
    """The defaults are submitted lowered to the node (--cpus-per-task=2, --mem=23GB, with a note); when squeue
    holds the array pending for PartitionConfig, the command cancels it and exits 2 with the reason within seconds
    (before: it waited with no message until cancelled by hand)."""
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.queue("41_[0-1%2]|gear|PartitionConfig")
    fake.accounting("41_[0-1%2]|PENDING|None assigned")
    sweep = tmp_path / "sweep"
    code = "import gear_repro.utils.slurm as s; s.PENDING_POLL_S = 0.2; " + RUN
    start = time.monotonic()
    proc = run_cli(["-m", "hydra/launcher=slurm", "retriever=bm25", "expansion=none,naive", "dataset.limit=1",
                    f"hydra.sweep.dir={sweep}"], tmp_path, code=code, timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert elapsed < 60
    assert ("note: hydra/launcher=slurm: cpus_per_task 4 -> 2, mem_gb 32 -> 23 to fit partition gear, node vm: "
            "2 CPUs, 23.5 GiB") in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: SLURM holds job 41_[0-1%2] of this sweep pending (PartitionConfig), which waiting never clears: its "
        "request exceeds what the partition's nodes or limits allow. The sweep stops waiting; cancelled it "
        "(scancel 41). Its request (hydra.launcher.*): nodes=1, tasks_per_node=1, cpus_per_task=2, mem_gb=23, "
        "gpus_per_node=0, timeout_min=720")
    (script,) = fake.submitted()
    assert "#SBATCH --cpus-per-task=2\n" in script and "#SBATCH --mem=23GB\n" in script
    assert "#SBATCH --array=0-1%2\n" in script
    assert fake.calls("scancel") == ["41"]
    assert "cpus_per_task: 2" in (sweep / "multirun.yaml").read_text()  # the record says what was asked


# --- The same on the real one-node cluster ---------------------------------------------------------------------------

def _node_size() -> tuple[int, int]:
    """CPUs and memory (MiB) of the one-node cluster's node (`scontrol show node`)."""
    out = subprocess.run(["scontrol", "-o", "show", "node"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    return int(re.search(r"\bCPUTot=(\d+)", out).group(1)), int(re.search(r"\bRealMemory=(\d+)", out).group(1))


def _docs_first_slurm_command() -> list[str]:
    """The first `gear-repro -m hydra/launcher=slurm ...` command of docs/sweeps.md (its continuation lines joined)."""
    import shlex

    text = (REPO / "docs" / "sweeps.md").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("gear-repro -m hydra/launcher=slurm"))
    return shlex.split(line)[1:]


@pytest.mark.slow
@pytest.mark.slurm
def test_the_docs_first_slurm_command_finishes_with_the_default_settings(cluster, tmp_path):
    """docs/sweeps.md's first SLURM command sets no hydra.launcher.* value: on the one-node cluster its jobs ask the
    defaults lowered to the node and finish (before: 4 CPUs, 32 GiB, pending for ever). Here on 2 questions with
    the mean path scorer (the command's 20 exact-scored questions take minutes)."""
    args = _docs_first_slurm_command()
    assert not [a for a in args if a.startswith("hydra.launcher.")], args
    args = [a for a in args if not a.startswith("dataset.limit=")]
    cpus, mem = _node_size()
    sweep = tmp_path / "sweep"
    driver = _gear([*args, "dataset.limit=2", "beam.scorer=mean", "run.progress=false", f"hydra.sweep.dir={sweep}"],
                   tmp_path / "driver.log")
    assert driver.wait(timeout=600) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    log = (tmp_path / "driver.log").read_text()
    runs = sorted(d for d in sweep.iterdir() if d.is_dir() and not d.name.startswith("."))
    assert len(runs) == 2 and all((d / "metrics.json").exists() for d in runs)
    if cpus < 4:
        assert f"cpus_per_task 4 -> {cpus}, mem_gb 32 -> {min(32, mem // 1024)}" in log
    array = _job(runs[0]).split("_")[0]
    _wait_for_array(array)
    _sacct(array)  # the accounting lags squeue: a task gone from the queue may still read RUNNING there
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", array, "-o", "JobID,State,AllocCPUS"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert {tuple(line.split("|")[1:]) for line in out.splitlines()} == {("COMPLETED", str(min(4, cpus)))}, out


@pytest.mark.slow
@pytest.mark.slurm
def test_a_request_larger_than_the_node_is_refused_within_seconds(cluster, tmp_path):
    """One CPU and one GiB more than the node has: exit 2 in seconds naming both settings, nothing submitted."""
    cpus, mem = _node_size()
    sweep = tmp_path / "sweep"
    start = time.monotonic()
    driver = _gear(["-m", "hydra/launcher=slurm", f"hydra.launcher.cpus_per_task={cpus + 1}",
                    f"hydra.launcher.mem_gb={mem // 1024 + 1}", "retriever=bm25", "expansion=none,naive",
                    f"hydra.sweep.dir={sweep}"], tmp_path / "driver.log")
    assert driver.wait(timeout=120) == 2
    assert time.monotonic() - start < 60
    last = (tmp_path / "driver.log").read_text().strip().splitlines()[-1]
    assert last.startswith("error: hydra/launcher=slurm asks more than partition ") and "can ever give" in last, last
    assert f"lower hydra.launcher.cpus_per_task={cpus} (asks {cpus + 1};" in last
    assert f"hydra.launcher.mem_gb={mem // 1024} (asks {mem // 1024 + 1} GiB; " in last
    assert not (sweep / ".submitit").exists()


@pytest.mark.slow
@pytest.mark.slurm
def test_a_sweep_pending_for_partition_config_ends_with_the_reason(cluster, tmp_path):
    """A request the check before submitting cannot see (sbatch's --ntasks-per-node through additional_parameters)
    larger than the node: SLURM holds the array pending (PartitionConfig); the command cancels it and exits 2 with
    the reason within seconds."""
    cpus, _ = _node_size()
    sweep = tmp_path / "sweep"
    start = time.monotonic()
    driver = _gear(["-m", "hydra/launcher=slurm", f"+hydra.launcher.additional_parameters.ntasks_per_node={cpus + 2}",
                    "retriever=bm25", "expansion=none,naive", f"hydra.sweep.dir={sweep}"], tmp_path / "driver.log")
    assert driver.wait(timeout=120) == 2, (tmp_path / "driver.log").read_text()[-3000:]
    assert time.monotonic() - start < 90
    last = (tmp_path / "driver.log").read_text().strip().splitlines()[-1]
    assert "pending (PartitionConfig), which waiting never clears" in last, last
    array = re.search(r"scancel (\d+)\)", last).group(1)
    _wait_for_array(array, timeout=60)
    states = _sacct(array)
    assert states and all(state.startswith("CANCELLED") for state in states.values()), states
