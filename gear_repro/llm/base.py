"""What a component needs of an LLM client (docs/ARCHITECTURE.md "LLM"): the role every caller types against.

:class:`gear_repro.llm.client.LLMClient` is the real one; tests pass doubles with the same two methods
(``tests/helpers/doubles.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gear_repro.llm.client import LLMReply


class LLM(Protocol):
    """An LLM client: ``chat`` records every call in the run's token ledger under ``stage`` and ``round_no``;
    ``check_ready`` is the start-up check (credentials; no network)."""

    def chat(self, messages: Sequence[dict], *, stage: str, round_no: int = 0, **params: Any) -> LLMReply: ...

    def check_ready(self) -> None: ...
