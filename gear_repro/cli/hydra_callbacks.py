"""Hydra callbacks of the ``gear-repro`` CLI (configs/config.yaml ``hydra.callbacks``)."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

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
