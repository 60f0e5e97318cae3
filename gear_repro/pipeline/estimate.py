"""The estimate said before a question run (docs/llm.md "Before a large run"): the calls a question can make under
the run's settings, as the agent's declaration plans them (``Component.llm_plan``: gear_repro/registry.py) and the
QA reader's with ``qa=true``, their prompts from the real templates, and the estimate of
:mod:`gear_repro.llm.estimate` over them. An agent whose declaration has no plan has no estimate."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from gear_repro.llm.estimate import RunEstimate, announce, estimate_calls, settings_of
from gear_repro.registry import component_for, find
from gear_repro.utils.component import PlannedCall, PromptSample

log = logging.getLogger(__name__)

_GIST_TRIPLES = 10  # triples in the gist memory a reason/rewrite prompt carries (GEAR keeps a few per round)


def planned_calls(cfg: Any) -> list[PlannedCall] | None:
    """The calls a question can make: an upper bound (every round to the agent's limit); None for an agent whose
    declaration has no plan (its estimate is not said)."""
    from omegaconf import OmegaConf

    agent = component_for(OmegaConf.select(cfg, "agent._target_", default=None))
    if agent is None or agent.llm_plan is None:
        return None
    plan = list(agent.llm_plan(cfg))
    reader = find("qa_reader", "qa_reader_schema")
    if OmegaConf.select(cfg, "qa", default=False) and reader.llm_plan is not None:
        plan += reader.llm_plan(cfg)
    return [p for p in plan if p.calls > 0]


def question_plan(cfg: Any) -> list[tuple[str, int, int]] | None:
    """``[(template, calls per question, passages in each prompt)]`` of :func:`planned_calls`."""
    plan = planned_calls(cfg)
    return None if plan is None else [(p.template, p.calls, p.passages) for p in plan]


def question_prompts(plan: list[PlannedCall], questions: Iterable[Any], passages: list[Any],
                     seed: int = 0) -> Iterable[list[dict]]:
    """The prompts of ``plan`` for each question, its passages the question's gold passages then corpus passages
    drawn (seeded), so their lengths are the corpus's; the gist memory ``_GIST_TRIPLES`` triples of the question's
    own words. Rendered with the real templates (``gear_repro.prompts``)."""
    import random

    from gear_repro.prompts import render

    rng = random.Random(seed)
    by_id = {p.id: p for p in passages}
    for q in questions:
        gold = [by_id[g] for g in getattr(q, "gold_ids", []) if g in by_id]
        words = q.question.split()
        memory = [(" ".join(words[i:i + 3]), "related to", " ".join(words[i + 3:i + 5]))
                  for i in range(0, min(len(words), 3 * _GIST_TRIPLES), 3)][:_GIST_TRIPLES]
        for call in plan:
            docs = (gold + rng.sample(passages, min(call.passages, len(passages))))[:call.passages]
            msgs = render(call.template, **call.values(PromptSample(q.question, docs, memory)))
            for _ in range(call.calls):
                yield msgs


def question_estimate(cfg: Any, questions: list[Any], passages: list[Any], llm: Any) -> RunEstimate | None:
    """The estimate of answering ``questions`` (the run's ``stage=retrieve``): :func:`planned_calls`, input tokens
    of :func:`question_prompts`, ``llm.estimate_output_tokens`` per call, time at ``run.workers`` questions in
    flight (each question's calls one after another). None when the agent has no plan."""
    from omegaconf import OmegaConf

    plan = planned_calls(cfg)
    if plan is None or not questions or not any(p.calls for p in plan):
        return None
    settings = settings_of(llm)
    workers = max(1, min(int(OmegaConf.select(cfg, "run.workers", default=1) or 1),
                         int(getattr(llm, "concurrency", 1) or 1)))
    per_q = sum(p.calls for p in plan)
    est = estimate_calls(question_prompts(plan, questions, list(passages)), stage=f"{len(questions)} questions",
                         model=str(getattr(llm, "model", "?")), concurrency=workers, settings=settings)
    return replace(est, output_source=f"{settings.output_tokens} per call, llm.estimate_output_tokens; at most "
                                      f"{per_q} calls a question: " + ", ".join(f"{p.calls} {p.template}" for p in plan))


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
