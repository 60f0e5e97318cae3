"""Small helpers for the JSON traces every step writes: counters and rounded seconds."""

from __future__ import annotations

from collections.abc import MutableMapping


def bump(counters: MutableMapping[str, int], key: str, n: int = 1) -> None:
    """``counters[key] += n`` (created at 0)."""
    counters[key] = counters.get(key, 0) + n


def seconds(x: float) -> float:
    """A duration in seconds rounded for traces (6 decimals)."""
    return round(float(x), 6)
