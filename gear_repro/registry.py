"""The registry: every component the harness knows, as the modules that declare them (each module's ``COMPONENTS``, a
tuple of :class:`~gear_repro.utils.component.Component`). Adding a method, a retriever or an expansion is one line
in :data:`SPECS`; a package of your own registers its declarations with :func:`register`.

The spec modules are imported on the first question asked (:func:`components`), and a declaration names its class
and settings by path: reading the registry imports no method's code. The order of :data:`SPECS` is the report's
display order (stages, tables).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError

__all__ = ["SPECS", "component_for", "components", "find", "group_components", "node_component", "register"]

SPECS: tuple[str, ...] = (
    "gear_repro.methods.gear.spec",  # GEAR: the agent, the expansions, the beam search
    "gear_repro.methods.single",  # single-step retrieval
    "gear_repro.retrieval.base",  # BM25, SBERT, hybrid, composed
    "gear_repro.methods.hipporag.spec",  # HippoRAG: the method and its retriever
    "gear_repro.methods.ircot",  # IRCoT, HippoRAG w/ IRCoT
    "gear_repro.methods.griever.spec",  # GRIEVER (a base retriever)
    "gear_repro.methods.t2rag.spec",  # T²RAG
    "gear_repro.qa.reader",  # the K.3 QA reader
    "gear_repro.backends.memory",
    "gear_repro.backends.elasticsearch",
    "gear_repro.backends.lucene",
    "gear_repro.embedding.embedder",
    "gear_repro.llm.client",
    "gear_repro.data.dataset",
)
_EXTRA: list[str] = []  # spec modules registered at run time (register())


def register(*modules: str) -> None:
    """Add spec modules (``"mypkg.toy.spec"``, each with a ``COMPONENTS`` tuple) after the harness's own; a module
    already registered is ignored. Call it before composing a config that names their classes."""
    new = [m for m in modules if m not in SPECS and m not in _EXTRA]
    if new:
        _EXTRA.extend(new)
        components.cache_clear()
        _by_target.cache_clear()


@cache
def components() -> tuple[Component, ...]:
    """Every declaration, in :data:`SPECS` order then the registered modules'; a ConfigError when two declare the
    same group schema or the same class path."""
    out: list[Component] = []
    for module in (*SPECS, *_EXTRA):
        out.extend(importlib.import_module(module).COMPONENTS)
    seen: dict[Any, Component] = {}
    for c in out:
        for key in ((c.group, c.schema), *c.targets):  # a path names one class, a schema one dataclass
            if key in seen:
                raise ConfigError(f"the registry declares {key} twice ({seen[key].target}, {c.target})")
            seen[key] = c
    return tuple(out)


@cache
def _by_target() -> dict[str, Component]:
    return {t: c for c in components() for t in c.targets}


def component_for(target: str | None) -> Component | None:
    """The declaration of the class ``target`` names (its ``_target_`` or an alias), None for another class."""
    return _by_target().get(target) if target else None


def node_component(group: str, node: Any) -> Component | None:
    """The declaration of a run's config node of ``group``: by its ``_target_``; a node without one by its group's
    only declaration (the beam search's settings). None for a class of no declaration."""
    target = node.get("_target_") if hasattr(node, "get") else None
    if target is None:
        options = group_components(group)
        return options[0] if len(options) == 1 else None
    found = component_for(str(target))
    return found if found is not None and found.group == group else None


def group_components(group: str) -> list[Component]:
    """The declarations of a config group, in registry order."""
    return [c for c in components() if c.group == group]


def find(group: str, schema: str) -> Component:
    """The declaration of ``group``'s schema ``schema`` (``find("agent", "single_schema")``)."""
    for c in group_components(group):
        if c.schema == schema:
            return c
    raise KeyError(f"{group}/{schema}")
