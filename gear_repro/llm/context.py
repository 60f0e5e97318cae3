"""Fitting prompts to the model's context window (``llm.context_window``).

The window is a fact of the LLM config: null = unknown = prompts are sent as built. When it is known, a prompt
built over a ranked passage list keeps the longest prefix of the list whose prompt leaves room for the reply
(``max_tokens`` of the call, else the client's default), i.e. the lowest-ranked passages are dropped first, as
the reference IRCoT packs its demonstrations up to a token budget (HippoRAG legacy ``src/baselines/ircot.py``
227-230). Tokens are counted with :func:`gear_repro.llm.tokens.count_messages` for the client's model.
A prompt that does not fit even without passages is a configuration error, raised at start-up by
:func:`check_fits`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gear_repro.llm.tokens import count_messages
from gear_repro.utils.errors import ConfigError

if TYPE_CHECKING:
    from gear_repro.llm.base import LLM

P = TypeVar("P")


def prompt_budget(llm: LLM, params: Mapping[str, Any] | None = None) -> int | None:
    """Tokens a prompt may take: ``llm.context_window`` minus the reply's ``max_tokens`` (None = unknown)."""
    if llm.context_window is None:
        return None
    reply = (params or {}).get("max_tokens")
    if reply is None:
        reply = llm.default_params.get("max_tokens")
    return int(llm.context_window) - int(reply or 0)


def prompt_tokens(llm: LLM, messages: list[dict]) -> int:
    """Prompt tokens of ``messages`` by the client's own counter (tiktoken, else chars/4)."""
    return count_messages(messages, llm.model)[0]


def fit_passages(llm: LLM, build: Callable[[Sequence[P]], list[dict]], passages: Sequence[P],
                 params: Mapping[str, Any] | None = None) -> tuple[list[dict], int]:
    """``(build(passages[:n]), len(passages) - n)`` for the largest n whose prompt fits the budget; all passages
    when the window is unknown. With none fitting, the prompt without passages (the call may still fail)."""
    budget = prompt_budget(llm, params)
    if budget is None:
        return build(passages), 0
    for n in range(len(passages), -1, -1):
        messages = build(passages[:n])
        if n == 0 or prompt_tokens(llm, messages) <= budget:
            return messages, len(passages) - n
    raise AssertionError("unreachable")


def check_fits(llm: LLM, messages: list[dict], what: str, params: Mapping[str, Any] | None = None) -> None:
    """ConfigError naming ``llm.context_window`` and the prompt ``what`` when ``messages`` (a prompt without
    passages) leave no room in the window."""
    budget = prompt_budget(llm, params)
    if budget is None:
        return
    n = prompt_tokens(llm, messages)
    if n > budget:
        raise ConfigError(
            f"the {what} prompt without passages takes {n} tokens, more than llm.context_window "
            f"({llm.context_window}) minus the reply's max_tokens ({llm.context_window - budget}) allows; use a "
            f"model with a larger window (llm.context_window), a smaller max_tokens or fewer demonstrations")
