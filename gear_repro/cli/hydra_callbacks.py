"""Hydra callbacks of the ``gear-repro`` CLI (configs/config.yaml ``hydra.callbacks``)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf, read_write

from gear_repro.config import redact


def _mask_changed(node: DictConfig | ListConfig, before: Any, after: Any) -> None:
    """Set each leaf of ``node`` where the redacted container ``after`` differs from ``before`` (interpolations
    stay: they hold no secret, and the jobs never read this copy)."""
    keys = range(len(before)) if isinstance(before, list) else before.keys()
    for key in keys:
        b, a = before[key], after[key]
        if b == a:
            continue
        child = node[key] if isinstance(b, dict | list) else None
        if isinstance(child, DictConfig | ListConfig):
            _mask_changed(child, b, a)
        else:
            node[key] = a


class RedactMultirunConfig(Callback):
    """Secrets in the sweep's master config (a user's own YAML: URL userinfo, header values, secret keys) are
    masked before the sweeper writes it to ``multirun.yaml``. The jobs compose their own configs again from the
    config files and overrides (Hydra's ``load_sweep_config``), so they keep the real values."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        for key in [k for k in config if k != "hydra"]:
            node = config[key]
            if not isinstance(node, DictConfig | ListConfig):
                continue
            before = OmegaConf.to_container(node, resolve=False)
            after = redact(before)
            if after != before:
                _mask_changed(node, before, after)


def _sweep_params(config: DictConfig) -> dict[str, str]:
    """``hydra.sweeper.params`` of a composed config ({} when it sets none)."""
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    return {str(k): str(v) for k, v in params.items()} if isinstance(params, DictConfig) else {}


def dropped_sweeps(config: DictConfig) -> dict[str, dict[str, str]]:
    """Per swept config-group choice (``-m experiment=a,b``: ``experiment=a``), the sweep its own config sets in
    ``hydra.sweeper.params`` that this multirun drops: Hydra takes the sweep from the primary config, composed
    before a swept choice is applied, so a preset's own axes never run. Each choice is composed as its job will
    be (the command's other overrides, Hydra's ``load_sweep_config``); {} when none sets a sweep of its own."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = GlobalHydra.instance().config_loader()
    overrides = OverridesParser.create(config_loader=loader).parse_overrides(list(config.hydra.overrides.task))
    fixed = [o.input_line for o in overrides if not o.is_sweep_override()]
    primary = _sweep_params(config)
    out: dict[str, dict[str, str]] = {}
    for o in overrides:
        key = o.get_key_element()
        if not o.is_sweep_override() or "." in key.lstrip("+~"):  # a value, not a config group
            continue
        for value in o.sweep_string_iterator():
            try:
                job = loader.load_sweep_config(config, [*fixed, f"{key}={value}"])
            except Exception:  # a choice that does not compose: its job fails on its own, naming it
                continue
            axes = {k: v for k, v in _sweep_params(job).items() if primary.get(k) != v}
            if axes:
                out[f"{key.lstrip('+~')}={value}"] = axes
    return out


class RefuseDroppedPresetSweeps(Callback):
    """``-m experiment=table4_diversity,table12_density`` would launch one job per preset, each without the sweep
    the preset declares (``beam: default,no_diversity``): refused before any job, exit 2, naming the dropped axes."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        dropped = dropped_sweeps(config)
        if not dropped:
            return
        listed = "; ".join(f"{choice} sweeps {', '.join(f'{k}={v}' for k, v in axes.items())}"
                           for choice, axes in dropped.items())
        first = next(iter(dropped))
        print(f"error: a multirun over presets that sweep themselves drops their own sweeps (Hydra reads "
              f"hydra.sweeper.params before a swept choice is applied): {listed}. Run one preset per command "
              f"(gear-repro -m {first} ...)", file=sys.stderr)
        raise SystemExit(2)


def given_launcher_settings(config: DictConfig) -> set[str]:
    """The ``hydra.launcher.*`` settings the command line sets (``hydra.overrides.hydra``), e.g. {"cpus_per_task"}."""
    keys = (str(o).split("=", 1)[0].lstrip("+~") for o in OmegaConf.select(config, "hydra.overrides.hydra",
                                                                             default=None) or [])
    return {k.removeprefix("hydra.launcher.") for k in keys if k.startswith("hydra.launcher.")}


class CheckSlurmRequest(Callback):
    """A ``hydra/launcher=slurm`` sweep whose jobs could never start waited for ever, silently (squeue: pending,
    PartitionConfig). Before submitting, its request is compared with the nodes of its partition
    (``utils.slurm.fit_request``): ``cpus_per_task``, ``mem_gb`` and ``timeout_min`` not set on the command line are
    lowered to what one node (and the partition's MaxTime) holds, with a note; a request no node can hold is
    refused (exit 2) naming the settings to lower. While the sweep waits, a thread polls squeue
    (``utils.slurm.PendingWatch``): a job pending for a reason that never clears is cancelled and the sweep ends
    (exit 2) with that reason, instead of waiting. No-op under any other launcher."""

    def __init__(self) -> None:
        self._watch: Any = None
        self._installed = False  # our SIGUSR1 handler is set; _previous is the one it replaced
        self._previous: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """submitit pickles the launcher, and with it Hydra's callbacks, for each job: the watch thread stays here."""
        return {"_watch": None, "_installed": False, "_previous": None}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = OmegaConf.select(config, "hydra.launcher", default=None)
        if not isinstance(launcher, DictConfig) or not str(launcher.get("_target_", "")).endswith(
                "submitit_launcher.SlurmLauncher"):
            return
        from gear_repro.utils.errors import ConfigError
        from gear_repro.utils.slurm import FITTED, PendingWatch, fit_request, submitit_job_ids

        params = {k: OmegaConf.select(launcher, k) for k in launcher if k != "submitit_folder"}
        params = {k: OmegaConf.to_container(v, resolve=True) if isinstance(v, DictConfig | ListConfig) else v
                  for k, v in params.items()}
        try:
            changed, fitted_to = fit_request(params, given_launcher_settings(config))
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        if changed:
            with read_write(launcher):
                for key, value in changed.items():
                    launcher[key] = value
            print("note: hydra/launcher=slurm: " + ", ".join(f"{k} {params[k]} -> {v}" for k, v in changed.items())
                  + f" to fit {fitted_to} (hydra.launcher.{{{','.join(FITTED)}}} not set on the command line are "
                  "lowered to fit; a value set there is checked, never lowered)", file=sys.stderr)
            params.update(changed)
        root = _submitit_root(str(OmegaConf.select(launcher, "submitit_folder")))
        before = {p.name for p in root.iterdir()} if root.is_dir() else set()
        self._watch = PendingWatch(lambda: submitit_job_ids(root, before), params, self._stuck)
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGUSR1, self._end_sweep)
            self._installed = True
        self._watch.start()

    def _stuck(self) -> None:
        """In the watch thread, once a stuck job is cancelled: interrupt the main thread's wait for the jobs (a
        signal wakes it from submitit's sleep; the handler raises there). Without the handler (Hydra not in the main
        thread) the message is printed here and submitit's own wait ends when sacct shows the job cancelled."""
        if not self._installed:
            print(f"error: {self._watch.message}", file=sys.stderr)
        else:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    def _end_sweep(self, signum: int, frame: Any) -> None:
        if self._watch is None or self._watch.message is None:  # not ours: whoever else handled SIGUSR1
            if callable(self._previous):
                self._previous(signum, frame)
            return
        print(f"error: {self._watch.message}", file=sys.stderr)
        raise SystemExit(2)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._watch is not None:
            self._watch.stop()
        if self._installed:
            signal.signal(signal.SIGUSR1, self._previous if self._previous is not None else signal.SIG_DFL)
            self._installed, self._previous = False, None


def _submitit_root(folder: str) -> Path:
    """The folder above submitit's per-job folders (``<sweep dir>/.submitit/%j`` -> ``<sweep dir>/.submitit``)."""
    parts = Path(folder).parts
    cut = next((i for i, part in enumerate(parts) if "%" in part), len(parts))
    return Path(*parts[:cut]) if cut else Path(".")
