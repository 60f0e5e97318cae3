"""The paper methods, one home each (docs/ARCHITECTURE.md): single-step retrieval with graph expansion and the
GEAR agent (``gear/``), HippoRAG (``hipporag/``), IRCoT and HippoRAG w/ IRCoT (``ircot.py``), GRIEVER
(``griever/``) and T²RAG (``t2rag/``). A method imports shared primitives (types, core, retrieval, llm, qa),
never the pipeline or another method's internals."""

from __future__ import annotations

from functools import cache
from typing import Any

from gear_repro.methods.report_contract import ReportHooks


@cache
def report_hooks() -> tuple[ReportHooks, ...]:
    """Every component's report hooks (docs/ARCHITECTURE.md "Adding a method"), in display order (stages)."""
    from gear_repro.methods.gear.report import HOOKS as GEAR
    from gear_repro.methods.griever.report import HOOKS as GRIEVER
    from gear_repro.methods.hipporag.report import HOOKS as HIPPORAG
    from gear_repro.methods.ircot import REPORT_HOOKS as IRCOT
    from gear_repro.methods.single import REPORT_HOOKS as SINGLE
    from gear_repro.methods.t2rag.report import HOOKS as T2RAG

    return (*GEAR, *SINGLE, *HIPPORAG, *IRCOT, *GRIEVER, *T2RAG)


def agent_hooks(node: Any) -> ReportHooks | None:
    """The hooks of a run's ``agent`` config node; a config without one (or with neither ``_target_`` nor ``name``)
    ran the single-step method."""
    from gear_repro.methods.report_contract import class_path
    from gear_repro.methods.single import SingleStep

    node = node or {}
    return hooks_for(node if node.get("_target_") or node.get("name") else {"_target_": class_path(SingleStep)})


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
