"""Query text handling of GRIEVER: relative-clause splitting (§4.2.1), words and n-grams for the entity
matcher (§4.3), and the heuristic query rewrite (§4.5).

Words are ``\\w`` runs joined by inner apostrophes, hyphens or dots ("Louis", "XV", "O'Neil", "U.S"); every
word keeps its character span in the query so the matcher's n-grams map back onto the text to rewrite it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_WORD = re.compile(r"\w+(?:['’.\-]\w+)*")
_SPACES = re.compile(r"\s+")

# Relative-clause connectors (§4.2.1 shows "where" and "who" in bold; the paper gives no full list).
DEFAULT_CONNECTORS: tuple[str, ...] = ("who", "whom", "whose", "which", "where", "that")

# Words an n-gram may not start or end with (§4.3: our choice; keeps "of the" / "the city" noise out).
STOPWORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "as", "is", "was", "were", "are", "be", "been", "did", "do", "does", "has", "have", "had", "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "that", "this", "these", "those", "it", "its", "his", "her", "their", "he", "she", "they", "than", "into", "about", "after", "before", "during"])
ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})


@dataclass(frozen=True)
class Word:
    """A word of the query and its character span [start, end)."""

    text: str
    start: int
    end: int


def words(text: str) -> list[Word]:
    """The query's words with character spans (the unit of clause splitting and of n-grams)."""
    return [Word(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]


def split_clauses(query: str, connectors: Sequence[str] = DEFAULT_CONNECTORS, include_full: bool = True,
                  min_words: int = 2) -> list[str]:
    """Sub-queries at relative-clause connectors (§4.2.1).

    For each connector word after the first word, the sub-query is the text after the connector up to the
    end ("... the city where the mother of the woman who brought ..." -> "the mother of the woman who
    brought ...", "brought ..."). The connector itself is dropped (it carries no content). The full query
    comes first when ``include_full``; sub-queries with fewer than ``min_words`` words are dropped;
    duplicates are removed (first kept).
    """
    conn = {c.casefold() for c in connectors}
    ws = words(query)
    out = [query.strip()] if include_full else []
    for i, w in enumerate(ws[1:-1], start=1):
        if w.text.casefold() in conn:
            sub = query[ws[i + 1].start:].strip()
            if len(words(sub)) >= min_words:
                out.append(sub)
    return list(dict.fromkeys(s for s in out if s))


def ngram_spans(ws: Sequence[Word], max_n: int, trim_stopwords: bool = True) -> list[tuple[int, int]]:
    """Word index spans [i, j) of the n-grams of length 1..max_n (§4.3), in (i, j) order.

    With ``trim_stopwords`` an n-gram does not end with a :data:`STOPWORDS` word and starts with none except
    an article (entity names such as "The North Star" begin with one).
    """
    out = []
    for i in range(len(ws)):
        first = ws[i].text.casefold()
        for j in range(i + 1, min(len(ws), i + max_n) + 1):
            if trim_stopwords and ((first in STOPWORDS and (first not in ARTICLES or j == i + 1))
                                   or ws[j - 1].text.casefold() in STOPWORDS):
                continue
            out.append((i, j))
    return out


def rewrite(query: str, ws: Sequence[Word], entity_span: tuple[int, int], replacement: str,
            predicate_span: tuple[int, int] | None = None) -> str:
    """§4.5: remove the matched predicate mention and replace the matched entity mention by ``replacement``
    (the unmatched complement entity of the best triple).

    Spans are word index spans [i, j). When the predicate mention overlaps or touches the entity mention
    (at most one word between them) both are replaced as one span; otherwise the predicate mention is
    removed and the entity mention replaced.
    """
    ei, ej = entity_span
    cuts: list[tuple[int, int, str]] = []
    if predicate_span is not None:
        pi, pj = predicate_span
        if pi <= ej + 1 and ei <= pj + 1:  # overlapping or adjacent (one word gap allowed)
            cuts.append((min(ei, pi), max(ej, pj), replacement))
        else:
            cuts += [(ei, ej, replacement), (pi, pj, "")]
    else:
        cuts.append((ei, ej, replacement))
    out = query
    for i, j, rep in sorted(cuts, key=lambda c: -c[0]):  # right to left keeps earlier offsets valid
        out = out[:ws[i].start] + rep + out[ws[j - 1].end:]
    return _SPACES.sub(" ", out).strip()
