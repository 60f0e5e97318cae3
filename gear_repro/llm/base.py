"""What a component needs of an LLM client (docs/ARCHITECTURE.md "LLM"): the role every caller types against.

:class:`gear_repro.llm.client.LLMClient` is the real one; tests pass doubles with the same methods and attributes
(``tests/helpers/doubles.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gear_repro.llm.client import LLMReply


class LLM(Protocol):
    """An LLM client: ``chat`` records every call in the run's token ledger under ``stage`` and the active
    :func:`gear_repro.llm.ledger.tags` (``round``, ``k``);
    ``check_ready`` is the start-up check (credentials, the model file and server flags, a TCP connection to an
    endpoint the harness does not start; no request sent), ``check_params`` that of request params
    (``llm.params``, a component's ``llm_params``: ConfigError naming ``<key>.<name>``); ``stats`` its counters (``llm_stats.json``);
    ``close`` stops what it started (a local server).

    Attributes: ``model`` (the name token counts use), ``concurrency`` (requests in flight at once,
    ``llm.concurrency``: the extraction's worker count), ``context_window`` (prompt + reply tokens, None = unknown:
    :mod:`gear_repro.llm.context`), ``default_params`` (request params of every call, e.g. ``max_tokens``)."""

    model: str
    concurrency: int
    context_window: int | None
    default_params: Mapping[str, Any]

    def chat(self, messages: Sequence[dict], *, stage: str, **params: Any) -> LLMReply: ...

    def check_ready(self) -> None: ...

    def check_params(self, params: Mapping[str, Any], key: str) -> None: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
