"""A toy method of a package outside gear_repro, written into a temporary folder: its class, settings, report hooks
and declaration (``toy_method/``), its config group option in a config folder of its own (added to Hydra's search
path), registered with the registry by one line. What docs/ARCHITECTURE.md "Add a method" asks of a method."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKAGE = "toy_method"
SPEC = f"{PACKAGE}.spec"

FILES = {
    "__init__.py": '"""A toy method: the base retriever\'s list, its first passage moved last."""\n',
    "method.py": '''
        from dataclasses import dataclass
        from typing import Any, ClassVar

        from gear_repro.methods.base import MethodOutput
        from gear_repro.utils.settings import Settings, num


        @dataclass
        class ToySettings(Settings):
            config_key: ClassVar[str] = "agent"

            _target_: str = "toy_method.method.ToyMethod"
            name: str = "toy"
            depth: int = num(10, ge=1)  # passages asked of the base retriever
            rewrite: bool = False  # ask the LLM to restate the question first (only planned: the toy never runs it)


        class ToyMethod:
            name = "toy"
            k_dependent = False
            needs_llm = False
            answers_questions = False
            max_rounds = None
            needs_vectors = False

            def __init__(self, retriever: Any, llm: Any = None, settings: ToySettings | None = None, **given: Any):
                self.settings = ToySettings.of(settings, "ToyMethod", **given)
                self.retriever, self.llm = retriever, llm

            def run(self, question, k):
                ranking = self.retriever.retrieve(question.question, self.settings.depth)
                ids = ranking.ids[1:] + ranking.ids[:1]
                return MethodOutput(ranking=type(ranking)(ids, [float(len(ids) - i) for i in range(len(ids))]),
                                    trace={"toy": {"moved": ranking.ids[:1]}})

            def check_prompts(self, questions) -> None:
                pass

            def describe(self) -> dict:
                return self.settings.asdict()

            def summarize(self, records) -> dict:
                return {}
    ''',
    "report.py": '''
        from gear_repro.methods.report_contract import ReportHooks, detail_table, passages_cell, with_notes


        def question_detail(record):
            toy = (record.get("trace") or {}).get("toy")
            return None if toy is None else [detail_table("Toy", ["moved last"], [[passages_cell(toy["moved"])]])]


        HOOKS = ReportHooks(names=("toy",), label=lambda config, parts: with_notes(f"Toy ({parts.base})", parts.notes),
                            stages=("toy_rewrite",), question_detail=question_detail)
    ''',
    "spec.py": '''
        from gear_repro.utils.component import Component, PlannedCall


        def toy_plan(cfg):
            rewrite = bool(cfg.agent.get("rewrite", False))
            return [PlannedCall("qa_no_passages", int(rewrite), 0, lambda s: {"question": s.question})]


        COMPONENTS = (Component("agent", "toy_schema", "toy_method.method.ToySettings", "toy_method.method.ToyMethod",
                                wiring=lambda node, dep: {"retriever": dep("retriever"),
                                                          "llm": dep("llm") if node.rewrite else None},
                                report="toy_method.report:HOOKS", llm_plan=toy_plan),)
    ''',
}
OPTION = """\
defaults:
  - /agent_toy_schema@_here_  # ToySettings
  - _self_

_target_: toy_method.method.ToyMethod
name: toy
depth: 10  # passages asked of the base retriever
"""


def write_toy_method(root: Path) -> tuple[Path, Path]:
    """The toy package under ``root/pkg`` and its config folder ``root/conf`` (``agent/toy.yaml``)."""
    pkg = root / "pkg" / PACKAGE
    pkg.mkdir(parents=True)
    for name, text in FILES.items():
        (pkg / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    conf = root / "conf" / "agent"
    conf.mkdir(parents=True)
    (conf / "toy.yaml").write_text(OPTION, encoding="utf-8")
    return pkg.parent, conf.parent


@contextmanager
def registered(spec: str = SPEC) -> Iterator[None]:
    """``spec`` in the registry (and its schemas in Hydra's ConfigStore) for the block; the registry as before
    after it."""
    from gear_repro import registry
    from gear_repro.config import register_configs

    before = list(registry._EXTRA)
    registry.register(spec)
    register_configs()
    try:
        yield
    finally:
        registry._EXTRA[:] = before
        registry.components.cache_clear()
        registry._by_target.cache_clear()
