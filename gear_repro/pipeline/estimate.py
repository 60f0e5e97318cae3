"""The estimate said before a question run (GEAR, IRCoT, HippoRAG, QA; docs/llm.md "Before a large run"): the
calls a question can make under the run's agent settings, their prompts from the real templates, and the estimate
of :mod:`gear_repro.llm.estimate` over them. Here, above the methods, because it reads each method's settings and
IRCoT's demonstrations."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from gear_repro.llm.estimate import RunEstimate, announce, estimate_calls, settings_of

log = logging.getLogger(__name__)

_GIST_TRIPLES = 10  # triples in the gist memory a reason/rewrite prompt carries (GEAR keeps a few per round)


def question_plan(cfg: Any) -> list[tuple[str, int, int]] | None:
    """``[(template, calls per question, passages in each prompt)]``: an upper bound (every round to
    ``agent.max_rounds``, GEAR stops earlier when its reasoner says the facts suffice); None for an agent it has no
    plan for (its estimate is not said)."""
    from omegaconf import OmegaConf

    agent = str(OmegaConf.select(cfg, "agent.name", default="") or "")
    rounds = int(OmegaConf.select(cfg, "agent.max_rounds", default=1) or 1)
    base_k = int(OmegaConf.select(cfg, "agent.base_k", default=10) or 10)
    plan: list[tuple[str, int, int]]
    if agent == "gear":
        gist_k = OmegaConf.select(cfg, "agent.gist_k", default=None)
        reads = rounds if str(OmegaConf.select(cfg, "expansion.name", default="sync")) == "sync" else 0
        plan = [("reader", reads, base_k), ("reader_gist", rounds, int(gist_k or 2 * base_k)),
                ("reason", rounds, 0), ("rewrite", rounds - 1, 0)]
    elif agent in ("ircot", "hipporag_ircot"):
        plan = [("ircot", rounds, int(OmegaConf.select(cfg, "agent.top_k", default=10) or 10))]
    elif agent == "hipporag":
        plan = [("hipporag_ner", 1, 0)]
    elif agent == "single":
        plan = []
    else:
        return None
    if OmegaConf.select(cfg, "qa", default=False):
        plan.append(("qa", 1, int(OmegaConf.select(cfg, "qa_reader.top_k", default=5) or 5)))
    return [p for p in plan if p[1] > 0]


def question_prompts(plan: list[tuple[str, int, int]], questions: Iterable[Any], passages: list[Any],
                     seed: int = 0, demos: str = "") -> Iterable[list[dict]]:
    """The prompts of ``plan`` for each question, its passages the question's gold passages then corpus passages
    drawn (seeded), so their lengths are the corpus's; the gist memory ``_GIST_TRIPLES`` triples of the question's
    own words; ``demos`` IRCoT's demonstrations. Rendered with the real templates (``gear_repro.prompts``)."""
    import random

    from gear_repro.prompts import render

    rng = random.Random(seed)
    by_id = {p.id: p for p in passages}
    for q in questions:
        gold = [by_id[g] for g in getattr(q, "gold_ids", []) if g in by_id]
        words = q.question.split()
        memory = [(" ".join(words[i:i + 3]), "related to", " ".join(words[i + 3:i + 5]))
                  for i in range(0, min(len(words), 3 * _GIST_TRIPLES), 3)][:_GIST_TRIPLES]
        for name, calls, k in plan:
            docs = (gold + rng.sample(passages, min(k, len(passages))))[:k]
            values = {"reader": {"docs": docs, "query": q.question},
                      "reader_gist": {"docs": docs, "query": q.question, "triples": memory},
                      "reason": {"query": q.question, "triples": memory},
                      "rewrite": {"query": q.question, "triples": memory, "reason": "The facts do not say."},
                      "ircot": {"demos": demos, "passages": docs, "question": q.question, "thoughts": ""},
                      "qa": {"passages": docs, "question": q.question},
                      "hipporag_ner": {"question": q.question}}[name]
            msgs = render(name, **values)
            for _ in range(calls):
                yield msgs


def question_estimate(cfg: Any, questions: list[Any], passages: list[Any], llm: Any) -> RunEstimate | None:
    """The estimate of answering ``questions`` (the run's ``stage=retrieve``): :func:`question_plan`'s calls,
    input tokens of :func:`question_prompts`, ``llm.estimate_output_tokens`` per call, time at ``run.workers``
    questions in flight (each question's calls one after another). None when the agent has no plan."""
    from omegaconf import OmegaConf

    plan = question_plan(cfg)
    if plan is None or not questions or not any(calls for _, calls, _ in plan):
        return None
    settings = settings_of(llm)
    workers = max(1, min(int(OmegaConf.select(cfg, "run.workers", default=1) or 1),
                         int(getattr(llm, "concurrency", 1) or 1)))
    per_q = sum(calls for _, calls, _ in plan)
    demos = ""
    if any(name == "ircot" for name, _, _ in plan):  # the demonstrations the agent puts in every CoT prompt
        from gear_repro.methods.ircot import format_demos, load_demos

        num = OmegaConf.select(cfg, "agent.num_demo", default=1)
        pool = load_demos(str(OmegaConf.select(cfg, "agent.demos", default="musique")))
        demos = format_demos(pool if num is None else pool[: int(num)])
    est = estimate_calls(question_prompts(plan, questions, list(passages), demos=demos), stage=f"{len(questions)} questions",
                         model=str(getattr(llm, "model", "?")), concurrency=workers, settings=settings)
    return replace(est, output_source=f"{settings.output_tokens} per call, llm.estimate_output_tokens; at most "
                                      f"{per_q} calls a question: " + ", ".join(f"{c} {n}" for n, c, _ in plan))


def announce_questions(cfg: Any, questions: list[Any], passages: list[Any], llm: Any) -> RunEstimate | None:
    """Say :func:`question_estimate` before a run's first question (:func:`announce`); an estimate that cannot be
    made is said as such, never a reason to stop the run."""
    try:
        est = question_estimate(cfg, questions, passages, llm)
    except Exception as e:  # the estimate informs; the run does not depend on it
        log.warning("no LLM cost/time estimate for this run (%s: %s)", type(e).__name__, e)
        return None
    if est is not None:
        announce(est, settings_of(llm), log)
    return est
