"""T²RAG's query triplets (seed 002, §4.3 Step 1): :class:`Clue`, its placeholders, the query proposition it
gives (Step 2.1) and how one clue fills another in (Step 2.3)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

RESOLVED, SEARCHABLE, FUZZY = "resolved", "searchable", "fuzzy"
_PLACEHOLDER = re.compile(r"\?[\w'-]*")
_WORD = re.compile(r"\w+")
_NAMED = re.compile(r"^\?[\w'-]+$")
_FUNCTION_WORDS = frozenset(("a", "an", "the", "is", "was", "are", "were", "be", "been", "has", "have", "had", "of",
                            "in", "on", "at", "to", "by", "for", "from", "as", "with", "its", "his", "her", "their"))


def _norm(text: str) -> str:
    """Casefolded words of ``text`` joined by one space (comparison key of a triplet part)."""
    return " ".join(_WORD.findall(text.casefold()))


@dataclass(frozen=True)
class Clue:
    """A query triplet (§4.3 Step 1): subject, predicate, object, each possibly holding a '?' placeholder."""

    subject: str
    predicate: str
    object: str

    @property
    def parts(self) -> tuple[str, str, str]:
        return (self.subject, self.predicate, self.object)

    @property
    def n_placeholders(self) -> int:
        """Number of '?' in the triplet (the authors' code counts characters: ``value.count('?')``)."""
        return sum(p.count("?") for p in self.parts)

    @property
    def kind(self) -> str:
        """resolved (0 placeholders), searchable (1) or fuzzy (>= 2), §4.3 Step 1."""
        n = self.n_placeholders
        return RESOLVED if n == 0 else SEARCHABLE if n == 1 else FUZZY

    @property
    def query(self) -> str:
        """Query proposition (§4.3 Step 2.1): the elements concatenated without their placeholders."""
        kept = (" ".join(_PLACEHOLDER.sub(" ", p).split()) for p in self.parts)
        return " ".join(k for k in kept if k)

    def query_for(self, placeholders: str) -> str:
        """The query proposition under ``agent.query_placeholders``: ``strip`` = :attr:`query`; ``code`` =
        TRAG.py:466-474, the non-empty parts that do not start with '?' joined by a space, verbatim ("film by ?x")."""
        if placeholders == "code":
            return " ".join(p for p in self.parts if p and not p.startswith("?"))
        return self.query

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of a triplet when de-duplicating: each part stripped and lower-cased, as TRAG.py:402-408
        (decomposition) and 1043-1056 (``_deduplicate_clues``) compare them ("Paris, France" and "paris france"
        stay two clues)."""
        return (self.subject.strip().lower(), self.predicate.strip().lower(), self.object.strip().lower())

    def pipe(self) -> str:
        """``s | p | o`` (the decomposition format)."""
        return " | ".join(self.parts)

    def block(self, label: str) -> str:
        """The Subject/Predicate/Object block of the resolve prompt (layout of the authors' code)."""
        return f"{label}:\nSubject: {self.subject}\nPredicate: {self.predicate}\nObject: {self.object}"

    def fills_in(self, other: Clue) -> bool:
        """Whether this clue is ``other`` with some placeholders filled in: it agrees with every known part
        of ``other`` (normalised; one part's words contained in the other's) and has fewer placeholders."""
        if self.n_placeholders >= other.n_placeholders:
            return False
        for mine, theirs in zip(self.parts, other.parts, strict=True):
            if "?" in theirs:
                continue
            a, b = set(_norm(mine).split()), set(_norm(theirs).split())
            if not a or not b or not (a <= b or b <= a):
                return False
        return True

    @property
    def named(self) -> set[str]:
        """Named placeholders (``?directorA``), casefolded; a bare '?' is not named."""
        return {m.casefold() for p in self.parts for m in _PLACEHOLDER.findall(p) if len(m) > 1}

    def fills_slot(self, other: Clue, bound: Clue | None = None) -> bool:
        """``fuzzy_match: placeholder``: this clue is ``other`` with placeholders filled in, judged by position.

        It has fewer '?', no named placeholder ``other`` lacks, a '?' only where ``other`` has one, and the known
        subject/object of ``bound`` (``other`` with the bound placeholders substituted) agree with its own
        (word containment); the predicate is compared (one shared content word) only when neither is known.
        """
        bound = bound or other
        if self.n_placeholders >= other.n_placeholders or not self.named <= other.named:
            return False
        if any("?" in mine and "?" not in theirs for mine, theirs in zip(self.parts, other.parts, strict=True)):
            return False
        known = [i for i in (0, 2) if "?" not in bound.parts[i]]
        if not known:
            return bool(_content_words(self.predicate) & _content_words(other.predicate))
        return all(_agree(self.parts[i], bound.parts[i]) for i in known)

    def bindings(self, other: Clue) -> dict[str, str]:
        """Named placeholders of ``other`` (whole parts) that this clue fills with a value."""
        return {theirs.strip().casefold(): mine for mine, theirs in zip(self.parts, other.parts, strict=True)
                if _NAMED.match(theirs.strip()) and "?" not in mine}

    def substitute(self, binding: dict[str, str]) -> Clue:
        """This clue with each whole-part named placeholder in ``binding`` replaced by its value."""
        return Clue(*(binding.get(p.strip().casefold(), p) for p in self.parts))


def _agree(a: str, b: str) -> bool:
    """One part's normalised words contained in the other's (both non-empty)."""
    x, y = set(_norm(a).split()), set(_norm(b).split())
    return bool(x and y and (x <= y or y <= x))


def _content_words(text: str) -> set[str]:
    return set(_norm(text).split()) - _FUNCTION_WORDS


def dedupe(clues: Sequence[Clue]) -> list[Clue]:
    """Clues in order, without duplicates by :attr:`Clue.key` (the code's ``_deduplicate_clues``)."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for c in clues:
        if c.key not in seen:
            seen.add(c.key)
            out.append(c)
    return out

