"""Which SLURM job this process is, and whether a job still runs: run dirs record it (run.json, the run-dir lock,
failure.json) so a resume on another node can take over a cancelled job's lock and the report can find its log."""

from __future__ import annotations

import os
import shutil
import subprocess

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
