"""The paper methods, one home each (docs/ARCHITECTURE.md): single-step retrieval with graph expansion and the
GEAR agent (``gear/``), HippoRAG (``hipporag/``), IRCoT and HippoRAG w/ IRCoT (``ircot.py``), GRIEVER
(``griever/``) and T²RAG (``t2rag/``). A method imports shared primitives (types, core, retrieval, llm, qa),
never the pipeline or another method's internals."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from gear_repro.methods.report_contract import ReportHooks
from gear_repro.utils.component import Component, load


def report_hooks() -> tuple[ReportHooks, ...]:
    """Every component's report hooks, in the registry's order (the display order of stages and tables): each
    declaration's ``report`` (gear_repro/registry.py), its ``targets`` the declaration's paths."""
    from gear_repro.registry import components

    return _hooks(components())


@cache
def _hooks(declared: tuple[Component, ...]) -> tuple[ReportHooks, ...]:
    """Per tuple of declarations (a component registered later gives a new tuple)."""
    return tuple(replace(load(c.report), targets=c.targets) for c in declared if c.report)


def agent_hooks(node: Any) -> ReportHooks | None:
    """The hooks of a run's ``agent`` config node; a config without one (or with neither ``_target_`` nor ``name``)
    ran the single-step method."""
    from gear_repro.registry import find

    node = node or {}
    return hooks_for(node if node.get("_target_") or node.get("name") else
                     {"_target_": find("agent", "single_schema").target})


def hooks_for(node: Any) -> ReportHooks | None:
    """The hooks of the class a run's config node names: by its ``_target_`` (or a former path of the class); a node
    without a known ``_target_`` (hand-written configs) by its ``name``. None for an unknown class."""
    if not node or not hasattr(node, "get"):
        return None
    target, name = node.get("_target_"), node.get("name")
    hooks = report_hooks()
    return (next((h for h in hooks if target and target in h.targets), None)
            or next((h for h in hooks if name is not None and name in h.names), None))


def is_figure2_reference(config: Any) -> bool:
    """Whether a run's config is the single-step run GEAR's Fig. 2 draws as its reference line: no multi-step
    method (an agent whose hooks have a ``rounds_table``) and an expansion whose hooks set ``figure2_reference``.
    The runner records it in run.json (``report_flags``); the report asks the config only for runs without it."""
    agent = agent_hooks((config or {}).get("agent"))
    if agent is not None and agent.rounds_table:
        return False
    exp = hooks_for((config or {}).get("expansion"))
    return bool(exp is not None and exp.figure2_reference)
