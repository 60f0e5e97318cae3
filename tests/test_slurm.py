"""Sweeps on a real SLURM cluster (issue 27): hydra/launcher=slurm against the one-node cluster of `make slurm-local`.

The cluster is brought up through `make slurm-local` (root; docs/sweeps.md); when it cannot come up the tests fail with
its output. The sweep is the issue's (`retriever=bm25,sbert expansion=none,naive embedder=minilm`) on N questions with
the mean path scorer (the exact scorer encodes every path: ~30 s per question on 2 busy cores). Corpus embeddings come
from the shared $GEAR_CACHE, as on a cluster; each run writes into its own temporary sweep dir.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import REPO, RUN
from tests.helpers.requirements import require_module

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

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
    while len(_records(run_dir)) < 1:
        assert driver.poll() is None and time.monotonic() < end, "the job never wrote a question"
        time.sleep(0.05)
    pid = json.loads((run_dir / ".lock").read_text())["pid"]
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
    dir) vanished from a combined report (session 19 probe 4.3)."""
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
