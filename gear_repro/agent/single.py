"""Single-step retrieval (GEAR Table 2, top half): C'_q = h_base^k(q, C), then graph expansion.

With expansion=none this is the plain base retriever. With NaiveGE/SyncGE (§4) the base list of
size k seeds the expansion, so the result depends on k: the runner calls it once per evaluated
rank (``run.matched_k``), as the paper's single-step rows do.
"""

from __future__ import annotations

import time

from hydra.utils import instantiate

from gear_repro.agent.base import MethodOutput
from gear_repro.types import Question


class SingleStep:
    name = "single"

    def __init__(self, resources, cfg, output_depth: int | None = None, name: str = "single"):
        self.name = name
        self.resources = resources
        self.retriever = resources.passage_retriever
        exp_cfg = cfg.get("expansion")
        self.expansion = instantiate(exp_cfg, resources=resources, beam=cfg.get("beam")) if exp_cfg else None
        self.expands = self.expansion is not None and getattr(self.expansion, "name", "none") != "none"
        # a retriever whose list depends on k (GRIEVER pools k per iteration) is run once per evaluated k too
        self.k_dependent = self.expands or bool(getattr(self.retriever, "k_dependent", False))
        self.output_depth = output_depth

    @property
    def needs_llm(self) -> bool:
        """Whether a question calls the LLM (checked at start-up): only through an expansion that reads."""
        return self.expands and bool(getattr(self.expansion, "needs_llm", False))

    def run(self, question: Question, k: int) -> MethodOutput:
        t0 = time.perf_counter()
        base = self.retriever.retrieve(question.question, k)
        timings = {"base_s": time.perf_counter() - t0}
        trace: dict = {"base": base.ids}
        ranking = base
        if self.expands:
            t1 = time.perf_counter()
            out = self.expansion.expand(question.question, base, question)
            timings["expansion_s"] = time.perf_counter() - t1
            ranking = out.ranking
            trace["expansion"] = out.trace
        if self.output_depth:
            ranking = ranking.top(self.output_depth)
        trace["timings"] = timings
        return MethodOutput(ranking=ranking, trace=trace)
