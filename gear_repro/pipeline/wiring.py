"""Wiring: builds the run's method from its config.

:func:`build_method` is how the runner (and tests) build a method from the run config: the expansion group
is built once and injected into methods whose class takes an ``expansion`` parameter; everything else a
method needs comes from its own config group (run-level values by interpolation, e.g.
``max_rounds: ${dataset.max_rounds}``). Methods never receive the whole config.
"""

from __future__ import annotations

import inspect
from typing import Any

from gear_repro.methods.base import Method, MethodOutput

__all__ = ["Method", "MethodOutput", "build_expansion", "build_method", "target_class"]


def target_class(node: Any) -> type | None:
    """The class a config node's ``_target_`` names (None for an absent node or one without ``_target_``)."""
    from hydra.utils import get_class

    if node is None or not hasattr(node, "get") or not node.get("_target_"):
        return None
    return get_class(str(node["_target_"]))


def build_expansion(cfg: Any, resources: Any) -> Any:
    """The run's graph expansion (``expansion`` group with the ``beam`` group); NoExpansion when unset."""
    from hydra.utils import instantiate

    from gear_repro.methods.gear.expansion import NoExpansion

    if not cfg.get("expansion"):
        return NoExpansion(resources)
    return instantiate(cfg.expansion, resources=resources, beam=cfg.get("beam"))


def build_method(cfg: Any, resources: Any) -> Method:
    """``instantiate(cfg.agent, resources=..., expansion=...)``; the expansion only for classes taking one."""
    from hydra.utils import instantiate

    kwargs: dict[str, Any] = {"resources": resources}
    if "expansion" in inspect.signature(target_class(cfg.agent)).parameters:
        kwargs["expansion"] = build_expansion(cfg, resources)
    return instantiate(cfg.agent, **kwargs, _recursive_=False)
