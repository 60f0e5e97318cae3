"""Single-step retrieval (GEAR Table 2, top half): C'_q = h_base^k(q, C), then graph expansion.

With expansion=none this is the plain base retriever. With NaiveGE/SyncGE (§4) the base list of
size k seeds the expansion, so the result depends on k (``k_dependent``, from the expansion's class):
the runner calls it once per evaluated rank (``run.matched_k``), as the paper's single-step rows do.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gear_repro.methods.base import Expansion, MethodOutput
from gear_repro.methods.report_contract import (
    BM25_SETTINGS,
    PaperValue,
    ReportHooks,
    RowParts,
    with_notes,
)
from gear_repro.retrieval.base import Retriever
from gear_repro.types import Question
from gear_repro.utils.component import Component, PlannedCall
from gear_repro.utils.settings import Settings, num


@dataclass
class SingleStepSettings(Settings):
    """``agent=single`` (configs/agent/single.yaml): the schema, :class:`SingleStep`'s settings and describe()."""

    config_key: ClassVar[str] = "agent"

    _target_: str = "gear_repro.methods.single.SingleStep"
    name: str = "single"  # label in run names and reports
    output_depth: int | None = num(None, ge=1)  # final ranking cut (null = keep all)
    # ids a run keeps per question (YAML: ${run.save_depth}; run.save_depth has its own >= 1). When neither the
    # retriever nor the expansion depends on k (their top k of a longer list is the k-list) the base list is
    # retrieved this deep, so the saved ranking reaches it with the same top k; a k-dependent method keeps its base
    # list at k (Table 2's matched k). 0 or null = k
    save_depth: int | None = num(None, ge=0)


class SingleStep:
    """Base retrieval then the run's expansion. Built by :func:`gear_repro.pipeline.wiring.build_method`.

    Args:
        retriever: the run's base retriever h_base over the passages.
        expansion: the graph expansion (NoExpansion / NaiveGE / SyncGE), built and injected by the wiring.
        settings, **given: :class:`SingleStepSettings` (an instance, or its fields as keywords).
    """

    name = "single"
    needs_vectors = False  # only what the retriever and the expansion need
    answers_questions = False
    max_rounds = None

    def __init__(self, retriever: Retriever, expansion: Expansion, settings: SingleStepSettings | None = None,
                 **given: Any):
        self.settings = SingleStepSettings.of(settings, "SingleStep", **given)
        self.name = self.settings.name
        self.save_depth = self.settings.save_depth
        self.output_depth = self.settings.output_depth
        self.retriever = retriever
        self.expansion = expansion
        # a retriever whose list depends on k (GRIEVER pools k per iteration) is run once per evaluated k too
        self.k_dependent = bool(expansion.k_dependent or retriever.k_dependent)

    @property
    def needs_llm(self) -> bool:
        """Whether a question calls the LLM (checked at start-up): only through an expansion that reads."""
        return self.expansion.needs_llm

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: the expansion's."""
        self.expansion.check_prompts(questions)

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (the expansion's include γ and the triple graph's hub statistics)."""
        return {**self.settings.asdict(), "k_dependent": self.k_dependent, "expansion": self.expansion.describe()}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """No run statistics beyond metrics.json's."""
        return {}

    def run(self, question: Question, k: int) -> MethodOutput:
        t0 = time.perf_counter()
        depth = k if self.k_dependent or not self.save_depth else max(k, self.save_depth)
        base = self.retriever.retrieve(question.question, depth)
        timings = {"base_s": time.perf_counter() - t0}
        trace: dict = {"base": base.ids[:k]}  # the base top k (the deeper list is the final ranking)
        t1 = time.perf_counter()
        out = self.expansion.expand(question.question, base)
        timings["expansion_s"] = time.perf_counter() - t1
        ranking = out.ranking
        trace["expansion"] = out.trace
        # the expansion's counters (SyncGE's unparsed reads, ...) where metrics.json's agent_stats and the run's
        # warning read them (they were one level down: a run whose every read failed said nothing)
        trace["counters"] = dict((out.trace or {}).get("counters") or {})
        if self.output_depth:
            ranking = ranking.top(self.output_depth)
        trace["timings"] = timings
        return MethodOutput(ranking=ranking, trace=trace)


def row_label(config: Mapping[str, Any], parts: RowParts) -> str:
    """"<base>" or "<base> + <expansion>" (GEAR Table 2, top half: base k matched to the evaluated rank); an expansion
    run at one base k (``run.matched_k=false``) says so ("Hybrid + SyncGE (base k = 15)"), and a renamed
    single-step config adds its name: neither is the paper's row."""
    label = parts.base + (f" + {parts.expansion}" if parts.expansion else "")
    notes = [f"base k = {parts.fixed_base_k}"] if parts.expansion and parts.fixed_base_k is not None else []
    name = (config.get("agent") or {}).get("name", "single")
    return with_notes(label, [*notes, *parts.notes, *([name] if name != "single" else [])])


# The base retrievers of Table 2's rows, as GEAR App. B.1 ran them on Elasticsearch: BM25 at ES's k1/b, the hybrid's
# RRF with k = 60 (Cormack et al., as Eq. 3), and GRIEVER's Composed (its BM25); their settings count for every
# method that retrieves with them (their declarations, retrieval/base.py, name these hooks and give their targets)
BM25_HOOKS = ReportHooks(paper_settings=BM25_SETTINGS)
HYBRID_HOOKS = ReportHooks(paper_settings=(*BM25_SETTINGS, PaperValue("retriever.k_rrf", "RRF k {value}", 60)))
COMPOSED_HOOKS = ReportHooks(paper_settings=BM25_SETTINGS)  # GRIEVER's Composed baseline (§4.2.2): BM25 re-scored densely

REPORT_HOOKS = ReportHooks(names=("single",), label=row_label)

def single_plan(cfg: Any) -> list[PlannedCall]:
    """A question's LLM calls: none of its own, its expansion's as that declaration plans them (SyncGE's reads)."""
    from omegaconf import OmegaConf

    from gear_repro.registry import component_for

    expansion = component_for(OmegaConf.select(cfg, "expansion._target_", default=None))
    return [] if expansion is None or expansion.llm_plan is None else list(expansion.llm_plan(cfg))


# the registry's declaration (gear_repro/registry.py): built with the run's retriever and expansion (by name)
COMPONENTS = (Component("agent", "single_schema", SingleStepSettings, SingleStepSettings._target_,
                        report=f"{__name__}:REPORT_HOOKS", llm_plan=single_plan),)
