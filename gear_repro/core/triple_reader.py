"""The K.2 reader (GEAR §4.1 Eq. 1, §5.1 Eq. 4; App. K.2): render the passages and the question (and, when
given, the gist memory), ask the LLM, parse the proximal triples.

One home for every method that reads passages into triples: SyncGE (Eq. 1, no memory; with G(n-1) in GEAR
rounds >= 2, as the authors' pseudocode ``reader(base_passages, query, gist_memory)``), GEAR's gist read
(Eq. 4), and later IRCoT / T²RAG. Passages are shown as the QA prompt shows them ("Wikipedia Title: ...",
:func:`gear_repro.prompts.format_passages`); the memory as ``("s", "p", "o")`` facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gear_repro.llm.context import check_fits, fit_passages
from gear_repro.types import Passage, Triple3

READER_PROMPT = "reader"  # App. K.2 without the gist-memory parts
MEMORY_PROMPT = "reader_gist"  # App. K.2 with the gist memory ("preliminary facts")


@dataclass
class ReadResult:
    """Proximal triples of one read and what the trace keeps about it."""

    triples: list[Triple3] = field(default_factory=list)
    prompt: str | None = None  # template used (None: nothing was read)
    reply: str | None = None
    failed: bool = False  # the reply held no parseable triple structure
    repaired: bool = False  # the parser had to repair the reply
    dropped: int = 0  # items that were not (s, p, o) triples
    error: str | None = None
    passages_dropped: int = 0  # lowest-ranked passages left out to fit llm.context_window (llm/context.py)

    def info(self) -> dict[str, Any]:
        """Trace record (everything but the triples)."""
        return {"prompt": self.prompt, "reply": self.reply, "failed": self.failed, "repaired": self.repaired,
                "dropped": self.dropped, "error": self.error, "passages_dropped": self.passages_dropped}


def read_triples(llm: Any, passages: Sequence[Passage], query: str, *, stage: str,
                 memory: Sequence[Sequence[str]] = (), prompt: str = READER_PROMPT,
                 memory_prompt: str = MEMORY_PROMPT, llm_params: Mapping[str, Any] | None = None) -> ReadResult:
    """T' = read(passages, query[, memory]) with ``llm.chat(..., stage=stage)`` (the round: ``ledger.tags``).

    Without ``memory`` the ``prompt`` template is used (K.2 plain reader), with it ``memory_prompt`` (K.2 with
    the gist memory). No passages: no call, an empty result. When ``llm.context_window`` is known, the
    lowest-ranked passages are dropped until the prompt fits (``passages_dropped``).
    """
    from gear_repro.llm.parsing import parse_triples
    from gear_repro.prompts import render

    if not passages:
        return ReadResult()
    name = memory_prompt if memory else prompt
    facts = {"triples": [tuple(t) for t in memory]} if memory else {}
    messages, cut = fit_passages(llm, lambda docs: render(name, docs=list(docs), query=query, **facts), passages,
                                 llm_params)
    reply = llm.chat(messages, stage=stage, **dict(llm_params or {}))
    parsed = parse_triples(reply.text)
    return ReadResult(triples=[(str(s), str(p), str(o)) for s, p, o in parsed.triples], prompt=name,
                      reply=reply.text, failed=parsed.failed, repaired=parsed.repaired, dropped=parsed.dropped,
                      error=parsed.error, passages_dropped=cut)


def check_reader_fits(llm: Any, questions: Sequence[str], *, prompt: str = READER_PROMPT,
                      llm_params: Mapping[str, Any] | None = None) -> None:
    """Start-up check: the ``prompt`` reader without passages, for the longest question, fits
    ``llm.context_window`` (:func:`gear_repro.llm.context.check_fits`)."""
    from gear_repro.prompts import render

    longest = max(questions, key=len, default="")
    check_fits(llm, render(prompt, docs=[], query=longest), f"K.2 reader ('{prompt}')", llm_params)
