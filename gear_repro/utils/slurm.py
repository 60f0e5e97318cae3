"""Which SLURM job this process is, and whether a job still runs: run dirs record it (run.json, the run-dir lock,
failure.json) so a resume on another node can take over a cancelled job's lock and the report can find its log."""

from __future__ import annotations

import os
import shutil
import subprocess

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
