"""Small helpers for the JSON traces every step writes: counters and rounded seconds."""

from __future__ import annotations

import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar

_COUNTS: ContextVar[MutableMapping[str, int] | None] = ContextVar("trace_counts", default=None)
_LOCK = threading.Lock()  # count() may run in a copied context on another thread (chat_many's requests)


def bump(counters: MutableMapping[str, int], key: str, n: int = 1) -> None:
    """``counters[key] += n`` (created at 0)."""
    counters[key] = counters.get(key, 0) + n


@contextmanager
def counting(into: MutableMapping[str, int] | None = None) -> Iterator[MutableMapping[str, int]]:
    """Collect the :func:`count` calls made in this context into ``into`` (a new dict by default), so that the
    steps of a method count what they met without a counters argument handed down to them. An inner ``counting``
    block collects its own (an expansion's counters stay apart from the agent's); the caller's is restored on exit.
    Keys keep the order of their first count, as with :func:`bump` on one dict."""
    counts: MutableMapping[str, int] = {} if into is None else into
    token = _COUNTS.set(counts)
    try:
        yield counts
    finally:
        _COUNTS.reset(token)


def count(key: str, n: int = 1) -> None:
    """``bump`` the counters of the enclosing :func:`counting` block (created at 0, also for ``n`` = 0); outside
    every block nothing is kept (a step called on its own)."""
    counts = _COUNTS.get()
    if counts is not None:
        with _LOCK:
            bump(counts, key, n)


def seconds(x: float) -> float:
    """A duration in seconds rounded for traces (6 decimals)."""
    return round(float(x), 6)
