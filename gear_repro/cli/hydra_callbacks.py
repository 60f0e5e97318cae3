"""Hydra callbacks of the ``gear-repro`` CLI (configs/config.yaml ``hydra.callbacks``)."""

from __future__ import annotations

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
