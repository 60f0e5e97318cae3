"""Chunking of documents into passages (GEAR Table 5 counts chunks: more chunks than documents).

A document longer than ``size`` words is split into windows of ``size`` words that overlap by ``overlap``
words (the last window ends at the document's end); each chunk keeps the title. Ids: a document that fits
in one chunk keeps its id (so triples and gold ids stay valid); the chunks of a split document get
``<id>#<n>`` (n from 0). Gold ids are mapped to every chunk of a gold document (a question's gold set then
counts chunks: Recall@k is over chunks). Triples of a split document go to the first chunk whose text
contains their subject (casefolded), else to chunk 0. ``size=0`` turns chunking off (the default of
``gear-repro-prepare``; the bundled samples are paragraphs already).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.errors import ConfigError


def chunk_text(words: Sequence[str], size: int, overlap: int) -> list[list[str]]:
    """Word windows of ``size`` with ``overlap`` words shared by neighbours; one window if it fits."""
    if len(words) <= size:
        return [list(words)]
    step = size - overlap
    starts = list(range(0, len(words) - size, step)) + [len(words) - size]
    return [list(words[s:s + size]) for s in starts]


def chunk_corpus(passages: Sequence[Passage], questions: Sequence[Question], triples: Sequence[Triple] | None,
                 size: int, overlap: int = 0) -> tuple[list[Passage], list[Question], list[Triple] | None, dict]:
    """Chunked passages, questions with gold ids mapped to chunks, re-assigned triples, and counts."""
    if size < 0 or overlap < 0 or (size and overlap >= size):
        raise ConfigError(f"chunking needs size >= 0 and 0 <= overlap < size (got size={size}, overlap={overlap})")
    if size == 0:
        return list(passages), list(questions), None if triples is None else list(triples), {"chunk_size": 0}
    out: list[Passage] = []
    chunks_of: dict[str, list[Passage]] = {}
    for p in passages:
        parts = chunk_text(p.text.split(), size, overlap)
        if len(parts) == 1:
            cs = [p]
        else:
            cs = [Passage(f"{p.id}#{n}", p.title, " ".join(w)) for n, w in enumerate(parts)]
        chunks_of[p.id] = cs
        out.extend(cs)
    qs = [replace(q, gold_ids=[c.id for g in q.gold_ids for c in chunks_of.get(g, [Passage(g, "", "")])])
          for q in questions]
    ts = None
    if triples is not None:
        ts = []
        for t in triples:
            cs = chunks_of.get(t.passage_id)
            if not cs or len(cs) == 1:
                ts.append(t)
                continue
            subj = t.subject.casefold()
            target = next((c for c in cs if subj and subj in c.text.casefold()), cs[0])
            ts.append(replace(t, passage_id=target.id))
    stats = {"chunk_size": size, "chunk_overlap": overlap, "documents": len(passages), "chunks": len(out),
             "documents_split": sum(len(c) > 1 for c in chunks_of.values())}
    return out, qs, ts, stats
