"""Token counts when a server reports no usage: tiktoken if its encoding loads, else an estimate.

tiktoken fetches its BPE files from the internet on first use; offline (as on these machines) it
fails once and the estimate (~4 characters per token) is used instead. ``tokens_source`` in the
ledger says which was used.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


@functools.cache
def _encoding(model: str) -> Any | None:
    try:
        import tiktoken

        try:
            return tiktoken.encoding_for_model(model)
        except KeyError:
            return tiktoken.get_encoding("o200k_base")
    except Exception as e:  # offline: the BPE file cannot be downloaded
        log.info("tiktoken encoding unavailable (%s); estimating tokens as chars/4", type(e).__name__)
        return None


def count_text(text: str, model: str) -> tuple[int, str]:
    """(tokens, source) for a text; source is 'tiktoken' or 'estimate'."""
    enc = _encoding(model)
    if enc is not None:
        return len(enc.encode(text, disallowed_special=())), "tiktoken"
    return math.ceil(len(text) / 4), "estimate"


def count_messages(messages: list[dict], model: str) -> tuple[int, str]:
    """Prompt tokens of chat messages (OpenAI's rule: 3 per message + 3 for the reply primer)."""
    total, source = 3, "tiktoken"
    for m in messages:
        n, source = count_text(str(m.get("content") or ""), model)
        total += n + 3
    return total, source
