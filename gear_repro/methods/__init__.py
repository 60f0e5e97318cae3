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


COMPONENT_GROUPS = ("retriever", "expansion", "agent")  # the config groups whose class makes a row's method


@cache
def _config_target(group: str, name: str) -> str | None:
    """The ``_target_`` of the bundled config ``configs/<group>/<name>.yaml`` (None without one)."""
    import yaml

    from gear_repro.utils.paths import config_dir

    path = config_dir() / group / f"{name}.yaml"
    if not name or not path.is_file():
        return None
    node = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return str(node["_target_"]) if isinstance(node, dict) and node.get("_target_") else None


def _same_class(a: str, b: str) -> bool:
    """Whether two class paths are one class: equal, the same hooks' paths (a former path), or one imported object."""
    if a == b or any(a in h.targets and b in h.targets for h in report_hooks()):
        return True
    from hydra.utils import get_class

    try:
        return get_class(a) is get_class(b)
    except Exception:  # a class that cannot be imported here is no built-in one
        return False


def user_target(group: str, node: Any) -> str | None:
    """The ``_target_`` of a run's config node when it is not the built-in class its ``name`` stands for
    (``retriever=bm25 retriever._target_=mypkg.TitleRetriever``; a built-in of another name counts too: the row
    would carry the config name's label and the paper's number), else None. A node whose name has no bundled
    config is the user's unless its class is the project's or declared in the registry (a registered method
    reports through its own hooks, gear_repro/registry.py)."""
    from gear_repro.registry import component_for

    if not node or not hasattr(node, "get") or not node.get("_target_"):
        return None
    target = str(node["_target_"])
    builtin = _config_target(group, str(node.get("name") or ""))
    if builtin is not None:
        return None if _same_class(target, builtin) else target
    return None if target.startswith("gear_repro.") or component_for(target) is not None else target


def class_label(target: str) -> str:
    """A user's class as its row names it: its ``name`` attribute (the README's TitleRetriever: "title"), else its
    class name; the path's last part when it cannot be imported here."""
    from hydra.utils import get_class

    try:
        cls = get_class(target)
    except Exception:
        return target.rsplit(".", 1)[-1]
    name = getattr(cls, "name", None)
    return name if isinstance(name, str) and name else cls.__name__
