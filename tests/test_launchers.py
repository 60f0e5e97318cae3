"""Sweeps beyond one process: the launcher config groups compose with the project's config."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from gear_repro.config import register_configs
from tests.helpers.requirements import require_module

CONFIGS = str(Path(__file__).resolve().parent.parent / "configs")


def _launcher(overrides: list[str]):
    register_configs()
    with initialize_config_dir(config_dir=CONFIGS, version_base=None):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra.launcher


def test_slurm_launcher_group_composes():
    require_module("hydra_plugins.hydra_submitit_launcher", "make test-deps")
    la = _launcher(["hydra/launcher=slurm", "hydra.launcher.partition=cpu"])
    assert la._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (la.partition, la.cpus_per_task, la.mem_gb, la.timeout_min) == ("cpu", 4, 32, 720)


def test_joblib_launcher_composes():
    require_module("hydra_plugins.hydra_joblib_launcher", "make test-deps")
    la = _launcher(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    assert la._target_ == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    assert la.n_jobs == 2


def test_jobs_of_other_processes_fail_on_errored_questions():
    """Under slurm/joblib the job itself must fail on errored questions (the command's exit code never sees them)."""
    from types import SimpleNamespace as NS

    from gear_repro.cli.run import _in_process

    assert _in_process(NS(launcher=NS(_target_="hydra._internal.core_plugins.basic_launcher.BasicLauncher")))
    assert not _in_process(NS(launcher=NS(_target_="hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher")))


def test_lock_of_another_node_is_taken_over_once_its_slurm_job_is_gone(tmp_path, monkeypatch):
    """A cancelled job's run-dir lock names its SLURM job: a resume on another node takes it over once squeue no longer
    lists that job; while it runs, or when squeue cannot tell, or without a job, the lock holds."""
    import json

    import pytest

    from gear_repro.utils import lock
    from gear_repro.utils.errors import ConfigError

    (tmp_path / lock.LOCK_FILE).write_text(json.dumps({"host": "node-7", "pid": 4242, "slurm_job": "31_2"}))
    for active in (True, None):
        monkeypatch.setattr(lock, "job_active", lambda job, a=active: a)
        with pytest.raises(ConfigError, match="in use by process 4242 on node-7"):
            lock.RunDirLock(tmp_path).acquire()
    monkeypatch.setattr(lock, "job_active", lambda job: job != "31_2")
    with lock.RunDirLock(tmp_path):
        assert json.loads((tmp_path / lock.LOCK_FILE).read_text())["host"] != "node-7"
    assert lock._owner_alive({"host": "node-7", "pid": 1, "slurm_job": None})


def test_sweep_over_presets_that_sweep_themselves_is_refused(toy_dir, tmp_path):
    """``-m experiment=a,b`` ran one job per preset without the sweep each declares (Hydra reads
    hydra.sweeper.params from the primary config, before a swept choice applies): refused before any job, naming
    the dropped axes. One such preset per command keeps its sweep; presets without a sweep
    of their own are swept as asked (Hydra's basic launcher, toy data, BM25)."""
    from tests.helpers.cli import run_cli, toy_args

    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    for name, own in (("deep", "run.save_depth: 20,30"), ("long", "dataset.limit: 1,2"), ("plain_a", None),
                      ("plain_b", None)):
        sweep = f"hydra:\n  sweeper:\n    params:\n      {own}\n" if own else ""
        (conf / f"{name}.yaml").write_text(f"# @package _global_\nrun:\n  save_depth: 25\n{sweep}", encoding="utf-8")

    def sweep(choices: str, out: str):
        return run_cli(["-m", "--config-dir", str(conf.parent), f"experiment={choices}", *toy_args(toy_dir),
                        f"hydra.sweep.dir={tmp_path / out}"], tmp_path)

    r = sweep("deep,long", "both")
    assert r.returncode == 2 and not (tmp_path / "both").exists(), r.stderr
    assert ("drops their own sweeps (Hydra reads hydra.sweeper.params before a swept choice is applied): "
            "experiment=deep sweeps run.save_depth=20,30; experiment=long sweeps dataset.limit=1,2. Run one preset "
            "per command (gear-repro -m experiment=deep ...)") in r.stderr
    r = sweep("deep", "one")
    assert r.returncode == 0, r.stderr
    assert sorted(p.parent.name[0] for p in (tmp_path / "one").glob("*/metrics.json")) == ["0", "1"]
    r = sweep("plain_a,plain_b", "plain")
    assert r.returncode == 0, r.stderr
    assert sorted(p.parent.name[0] for p in (tmp_path / "plain").glob("*/metrics.json")) == ["0", "1"]
