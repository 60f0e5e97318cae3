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

from gear_repro.llm.tokens import count_messages, count_text, estimate_reason

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
        from gear_repro.llm.prices import load_prices

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
        source = f"~4 characters per token: {estimate_reason(model)}"
    per_call = settings.output_tokens if output_tokens is None else output_tokens
    uncached = calls - cached
    ct = round(uncached * per_call)
    from gear_repro.llm.prices import price_for_model, usd

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
