"""The registry: every component the harness knows, as the modules that declare them (each module's ``COMPONENTS``, a
tuple of :class:`~gear_repro.utils.component.Component`). Adding a method, a retriever or an expansion is one line
in :data:`SPECS`; a package of your own registers its declarations with :func:`register`.

A spec module is imported when a question needs it: a node's lookup (:func:`node_component`, :func:`component_for`)
imports only the modules :data:`SPECS` lists for its group, and of those the ones whose package holds the class's
path; :func:`components` imports them all. A declaration names its class and settings by path, so reading it imports
no method's code. The order of :data:`SPECS` is the report's display order (stages, tables).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError

__all__ = ["SPECS", "component_for", "components", "find", "group_components", "node_component", "register"]

# spec module -> the config groups it declares (a lookup imports only the modules of a node's group)
SPECS: dict[str, tuple[str, ...]] = {
    "gear_repro.methods.gear.spec": ("agent", "expansion", "beam"),  # GEAR: the agent, the expansions, the beam search
    "gear_repro.methods.single": ("agent",),  # single-step retrieval
    "gear_repro.retrieval.base": ("retriever",),  # BM25, SBERT, hybrid, composed
    "gear_repro.methods.hipporag.spec": ("agent", "hipporag"),  # HippoRAG: the method and its retriever
    "gear_repro.methods.ircot": ("agent",),  # IRCoT, HippoRAG w/ IRCoT
    "gear_repro.methods.griever.spec": ("retriever",),  # GRIEVER (a base retriever)
    "gear_repro.methods.t2rag.spec": ("agent",),  # T²RAG
    "gear_repro.qa.reader": ("qa_reader",),  # the K.3 QA reader
    "gear_repro.backends.memory": ("backend",),
    "gear_repro.backends.elasticsearch": ("backend",),
    "gear_repro.backends.lucene": ("backend",),
    "gear_repro.embedding.embedder": ("embedder",),
    "gear_repro.llm.client": ("llm",),
    "gear_repro.data.dataset": ("dataset",),
}
_EXTRA: list[str] = []  # spec modules registered at run time (register()); their groups are not known beforehand


def register(*modules: str) -> None:
    """Add spec modules (``"mypkg.toy.spec"``, each with a ``COMPONENTS`` tuple) after the harness's own; a module
    already registered is ignored. Call it before composing a config that names their classes."""
    new = [m for m in modules if m not in SPECS and m not in _EXTRA]
    if new:
        _EXTRA.extend(new)
        components.cache_clear()
        _by_target.cache_clear()


def _declared(module: str) -> tuple[Component, ...]:
    return tuple(importlib.import_module(module).COMPONENTS)


def _modules(group: str | None) -> list[str]:
    """The spec modules that may declare ``group`` (every module for None), in registry order: the harness's that
    do, then every registered one."""
    return [*(m for m, groups in SPECS.items() if group is None or group in groups), *_EXTRA]


@cache
def components() -> tuple[Component, ...]:
    """Every declaration (imports every spec module), in :data:`SPECS` order then the registered modules'; a
    ConfigError when two declare the same group schema or the same class path, or a module declares a group
    :data:`SPECS` does not list for it."""
    out: list[Component] = []
    for module in (*SPECS, *_EXTRA):
        declared = _declared(module)
        stray = sorted({c.group for c in declared} - set(SPECS.get(module, (c.group for c in declared))))
        if stray:
            raise ConfigError(f"{module} declares groups {stray} the registry's SPECS does not list for it")
        out.extend(declared)
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


def _near(target: str, modules: list[str]) -> list[str]:
    """The modules likeliest to declare ``target``: those whose package (the module, less a trailing ``.spec``)
    holds it, else those whose parent package does (``gear_repro.retrieval.BM25Retriever``, declared in
    ``gear_repro.retrieval.base``)."""
    homes = {m: m.removesuffix(".spec") for m in modules}
    return ([m for m in modules if target.startswith(homes[m] + ".")]
            or [m for m in modules if target.startswith(homes[m].rpartition(".")[0] + ".")])


def component_for(target: str | None, group: str | None = None) -> Component | None:
    """The declaration of the class ``target`` names (its ``_target_`` or an alias), None for another class; with
    ``group``, of that group only. Only the spec modules near the path are imported when one of them declares it (a
    path is declared once)."""
    if not target:
        return None
    modules = _modules(group)
    for c in (c for m in _near(target, modules) for c in _declared(m)):
        if target in c.targets and (group is None or c.group == group):
            return c
    found = _by_target().get(target)
    return found if found is not None and (group is None or found.group == group) else None


def node_component(group: str, node: Any) -> Component | None:
    """The declaration of a run's config node of ``group``: by its ``_target_``; a node without one by its group's
    only declaration (the beam search's settings). None for a class of no declaration."""
    target = node.get("_target_") if hasattr(node, "get") else None
    if target is None:
        options = group_components(group)
        return options[0] if len(options) == 1 else None
    return component_for(str(target), group)


def group_components(group: str) -> list[Component]:
    """The declarations of a config group, in registry order (imports only the modules that declare the group)."""
    return [c for m in _modules(group) for c in _declared(m) if c.group == group]


def find(group: str, schema: str) -> Component:
    """The declaration of ``group``'s schema ``schema`` (``find("agent", "single_schema")``)."""
    for c in group_components(group):
        if c.schema == schema:
            return c
    raise KeyError(f"{group}/{schema}")
