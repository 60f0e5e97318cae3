"""Cost and time estimate of a batch of LLM calls, said before the first one is sent (docs/llm.md, "Before a large run").

A user extracting triples for IRCoT's MuSiQue corpus (148,793 passages, GEAR Table 5) with gpt-4o-mini (App. K.1)
learns what it will take before paying for it: calls (less those the reply cache already holds), input tokens
counted on the actual prompts (tiktoken where its encoding loads, else ~4 characters per token: ``tokens.py``,
the source is said), output tokens (measured on the dataset's reference triples written as a K.1 reply where it has
them, else ``llm.estimate_output_tokens``), dollars at the list prices of ``resources/prices.yaml``
(``reporting/cost.py``: no second price table) and wall time = uncached calls x ``llm.estimate_latency_s`` /
``llm.concurrency``. One INFO line always; past ``llm.estimate_warn_usd`` dollars or ``llm.estimate_warn_s``
seconds the same figures as a WARNING that says how to stop or shrink the run. Never a prompt: CI and SLURM jobs
must not wait on a keyboard. After the first calls the estimate is said again from measured latency and output
tokens (:meth:`RunEstimate.revised`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from gear_repro.llm.tokens import count_messages, count_text

log = logging.getLogger(__name__)

# the llm schema (gear_repro/config.py) declares these knobs with these defaults and ranges
ESTIMATE_LATENCY_RANGE = {"gt": 0, "ge": None, "le": 3600, "lt": None}
ESTIMATE_OUTPUT_RANGE = {"ge": 1, "gt": None, "le": None, "lt": None}
ESTIMATE_WARN_RANGE = {"ge": 0, "gt": None, "le": None, "lt": None}


@dataclass(frozen=True)
class EstimateSettings:
    """``llm.estimate_*``: seconds per call before any is measured, output tokens per call when nothing better is
    known, and the dollars / seconds past which the estimate is a WARNING."""

    latency_s: float = 2.0
    output_tokens: int = 200
    warn_usd: float = 5.0
    warn_s: float = 3600.0


@dataclass(frozen=True)
class RunEstimate:
    """What a batch of calls will take; ``usd`` None = the model has no list price (local or self-hosted)."""

    stage: str
    model: str
    calls: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    tokens_source: str
    output_source: str
    usd: float | None
    price_model: str | None
    price_date: str | None
    concurrency: int
    latency_s: float
    latency_source: str
    wall_s: float

    @property
    def uncached(self) -> int:
        return self.calls - self.cached

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"uncached": self.uncached}

    def line(self) -> str:
        """One human line: calls, tokens, $ and time, with what each rests on."""
        cost = (f"${self.usd:,.2f} at {self.price_model} list prices of {self.price_date}" if self.usd is not None
                else f"no list price for {self.model} in resources/prices.yaml")
        return (f"{self.stage} estimate: {self.uncached:,} LLM calls to send ({self.calls:,} in all, {self.cached:,} "
                f"already in the reply cache); {self.prompt_tokens:,} input tokens ({self.tokens_source}, from the "
                f"actual prompts), {self.completion_tokens:,} output tokens ({self.output_source}); {cost}; "
                f"~{_duration(self.wall_s)} at llm.concurrency={self.concurrency} and {self.latency_s:.3g} s per call "
                f"({self.latency_source})")

    def revised(self, done: int, elapsed_s: float, completion_tokens: int) -> RunEstimate:
        """The estimate of the whole batch again from the first ``done`` uncached calls: their mean output tokens
        and their throughput (``elapsed_s`` wall seconds, retries and backoff included)."""
        if done < 1 or elapsed_s <= 0:
            return self
        per_call = completion_tokens / done
        out = round(self.uncached * per_call)
        cost = None if self.usd is None else self.usd + (out - self.completion_tokens) * self._out_price()
        latency = elapsed_s * self.concurrency / done  # the per-call latency that gives the measured throughput
        return replace(self, completion_tokens=out, output_source=f"mean of the first {done} replies",
                       usd=cost, latency_s=latency, latency_source=f"measured on the first {done} calls",
                       wall_s=self.uncached * elapsed_s / done)

    def _out_price(self) -> float:
        from gear_repro.reporting.cost import load_prices

        return load_prices(None, self.price_model)["output"] / 1e6 if self.price_model else 0.0


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def estimate_calls(prompts: Iterable[list[dict]], *, stage: str, model: str, concurrency: int,
                   settings: EstimateSettings, output_tokens: float | None = None, output_source: str | None = None,
                   is_cached: Any = None) -> RunEstimate:
    """Estimate ``prompts`` (one chat message list per call). Input tokens: :func:`count_messages` of each prompt
    that ``is_cached`` (a predicate over a prompt; None = none cached) says is not in the reply cache; output tokens:
    ``output_tokens`` per call (``output_source`` says where it comes from) else ``settings.output_tokens``."""
    calls = cached = pt = 0
    source = "tiktoken"
    for messages in prompts:
        calls += 1
        if is_cached is not None and is_cached(messages):
            cached += 1
            continue
        n, source = count_messages(messages, model)
        pt += n
    if source == "estimate":
        source = "~4 characters per token: tiktoken's encoding did not load"
    per_call = settings.output_tokens if output_tokens is None else output_tokens
    uncached = calls - cached
    ct = round(uncached * per_call)
    from gear_repro.reporting.cost import price_for_model, usd

    prices = price_for_model(model)
    return RunEstimate(
        stage=stage, model=model, calls=calls, cached=cached, prompt_tokens=pt, completion_tokens=ct,
        tokens_source=source,
        output_source=output_source or f"{per_call:g} per call, llm.estimate_output_tokens",
        usd=None if prices is None else usd(pt, ct, prices), price_model=None if prices is None else prices["model"],
        price_date=None if prices is None else prices["date"], concurrency=max(1, int(concurrency)),
        latency_s=settings.latency_s, latency_source="llm.estimate_latency_s, assumed",
        wall_s=uncached * settings.latency_s / max(1, int(concurrency)))


def is_large(est: RunEstimate, settings: EstimateSettings) -> bool:
    """Past ``llm.estimate_warn_usd`` dollars or ``llm.estimate_warn_s`` seconds."""
    return (est.usd is not None and est.usd > settings.warn_usd) or est.wall_s > settings.warn_s


def announce(est: RunEstimate, settings: EstimateSettings, logger: logging.Logger | None = None) -> bool:
    """Log the estimate: INFO, or a WARNING that stands out for a large run (:func:`is_large`). No prompt and no
    wait: the run goes on either way (a batch job has no keyboard). Returns whether it was large."""
    logger = logger or log
    large = is_large(est, settings)
    if not large:
        logger.info("%s", est.line())
        return False
    logger.warning("LARGE LLM RUN: %s. Over llm.estimate_warn_usd=%g / llm.estimate_warn_s=%g; it starts now "
                   "(interrupt it, or limit it, e.g. dataset.limit_passages=N; finished work is kept on re-run)",
                   est.line(), settings.warn_usd, settings.warn_s)
    return True


def reply_tokens(replies: Iterable[str], model: str) -> tuple[float, int] | None:
    """(mean tokens, count) of ``replies`` (texts of the kind the stage expects), None when there are none."""
    total = n = 0
    for text in replies:
        total += count_text(text, model)[0]
        n += 1
    return (total / n, n) if n else None


def settings_of(llm: Any) -> EstimateSettings:
    """The ``llm.estimate_*`` settings of a client (the defaults for an LLM double without them)."""
    s = getattr(llm, "estimate", None)
    if isinstance(s, EstimateSettings):
        return s
    if isinstance(s, Mapping):
        return EstimateSettings(**s)
    return EstimateSettings()


# What one question of a run sends at most, per agent (calls of a kind, the prompt, passages in it): GEAR's round is
# SyncGE's reader (K.2, expansion.py "read"), the gist read (agent.py "gist"), reason and, before the last round,
# rewrite (agent.py:246, :259); IRCoT one CoT step per round (ircot.py "cot"); then the K.3 reader when qa=true.
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
