"""Token ledger: one record per LLM call (DESIGN.md "Tokens"; paper Fig. 4 / Table 4 token counts)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

LEDGER_FIELDS = ("stage", "round", "prompt_tokens", "completion_tokens", "cached", "latency_s", "model",
                 "tokens_source", "ok", "error", "ts")


_SCOPE: ContextVar[list[dict[str, Any]] | None] = ContextVar("ledger_scope", default=None)
# A call outside every round loop (single-step reads, K.3 QA, K.1 extraction) is round 0.
_TAGS: ContextVar[Mapping[str, Any]] = ContextVar("ledger_tags", default=MappingProxyType({"round": 0}))


@contextmanager
def tags(**kw: Any) -> Iterator[None]:
    """Tag every ledger record added in this context with ``kw`` (``round`` of a method's loop, the runner's matched
    ``k``): the tags of enclosing ``tags`` blocks stay, an inner value wins, all are restored on exit. A tag named as
    a ledger field (``round``) sets that field; any other becomes an extra key after the record's own keys.

    The tags live in a ContextVar, so questions in other threads (``run.workers``) keep their own; work handed to
    an executor sees them only when submitted with ``contextvars.copy_context().run`` (``LLMClient.chat_many``
    and the runner's question pool do)."""
    token = _TAGS.set(MappingProxyType({**_TAGS.get(), **kw}))
    try:
        yield
    finally:
        _TAGS.reset(token)


def active_tags() -> Mapping[str, Any]:
    """The tags a ledger record added here gets (read-only; ``round`` is always there, 0 outside a round loop)."""
    return _TAGS.get()


@contextmanager
def call_scope() -> Iterator[list[dict[str, Any]]]:
    """Collect (copies of) the records every ledger adds in this context: one question's calls, whatever other
    questions run in other threads at the same time (``run.workers``). ``LLMClient.chat_many`` runs its requests
    in the caller's context, so they land in the caller's scope."""
    records: list[dict[str, Any]] = []
    token = _SCOPE.set(records)
    try:
        yield records
    finally:
        _SCOPE.reset(token)


class TokenLedger:
    """Append-only, thread-safe list of call records (plain JSON-ready dicts).

    Each record: ``stage`` (extract/read/gist/reason/rewrite/qa), ``round`` (from :func:`tags`), ``prompt_tokens``,
    ``completion_tokens`` (server usage, else tiktoken, else an estimate: ``tokens_source``),
    ``cached``, ``latency_s``, ``model``, ``ok`` and ``error`` (failed calls are recorded with 0 tokens), ``ts``.
    Per question: ``with call_scope() as calls: ...`` (thread-safe); or ``m = ledger.mark(); ...; ledger.since(m)``
    when one thread uses the ledger.
    """

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, **rec: Any) -> dict[str, Any]:
        """Append one call record: ``rec``'s fields, the fields it does not give from the active :func:`tags`,
        then ``rec``'s other keys, then the other tags (a key ``rec`` gives explicitly wins over a tag)."""
        rec.setdefault("ts", round(time.time(), 3))
        tagged = _TAGS.get()
        out = ({k: rec[k] if k in rec else tagged.get(k) for k in LEDGER_FIELDS}
               | {k: v for k, v in rec.items() if k not in LEDGER_FIELDS}
               | {k: v for k, v in tagged.items() if k not in LEDGER_FIELDS and k not in rec})
        with self._lock:
            self.records.append(out)
        scope = _SCOPE.get()
        if scope is not None:
            scope.append(dict(out))
        return out

    def mark(self) -> int:
        """A position to slice from later with ``since``."""
        with self._lock:
            return len(self.records)

    def since(self, mark: int) -> list[dict[str, Any]]:
        """Records appended after ``mark`` (copies)."""
        with self._lock:
            return [dict(r) for r in self.records[mark:]]

    def __len__(self) -> int:
        return len(self.records)

    @staticmethod
    def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
        """Totals overall and per stage; ``billed_*`` counts only calls not served from cache."""
        def empty() -> dict[str, Any]:
            return {"calls": 0, "cached": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0,
                    "billed_prompt_tokens": 0, "billed_completion_tokens": 0, "latency_s": 0.0}

        total, by_stage = empty(), defaultdict(empty)
        for r in records:
            for agg in (total, by_stage[r.get("stage") or "?"]):
                agg["calls"] += 1
                agg["cached"] += int(bool(r.get("cached")))
                agg["failed"] += int(r.get("ok") is False)
                pt, ct = int(r.get("prompt_tokens") or 0), int(r.get("completion_tokens") or 0)
                agg["prompt_tokens"] += pt
                agg["completion_tokens"] += ct
                if not r.get("cached"):
                    agg["billed_prompt_tokens"] += pt
                    agg["billed_completion_tokens"] += ct
                agg["latency_s"] = round(agg["latency_s"] + float(r.get("latency_s") or 0.0), 4)
        return {**total, "by_stage": dict(by_stage)}

    def totals(self) -> dict[str, Any]:
        return self.summarize(self.since(0))
