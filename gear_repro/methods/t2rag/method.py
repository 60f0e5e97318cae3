"""T²RAG: triplet-driven thinking over a proposition index (seed 002, §4; Algorithms 1-2; App. E prompts).

Offline (§4.2): every triple t = (s, p, o) of T is a proposition "s p o" mapped to its passage. The harness's
triple collection already indexes exactly that, one document per triple id with its ``passage_id``
(:func:`gear_repro.core.triple_graph.triple_docs`), so every mapping is kept, also duplicate propositions
from different passages (they score alike and each brings its own passage; the prompt lists a text once).

Online (§4.3, Alg. 1):

1. Decompose (App. E "Structured Query Decomposition"): q -> triplets ``s | p | o`` with ``?`` placeholders,
   classified by their number of placeholders: resolved (0), searchable (1), fuzzy (>= 2).
2. For l = 1..N while searchable or fuzzy triplets remain:
   2.1 adaptive retrieval (Alg. 2): each searchable triplet's known parts form a query proposition; the
       candidates of all queries are pooled and ranked globally by their best cosine similarity, and
       propositions are taken in that order until ``k`` unique passages are reached;
   2.2 resolve (App. E "Triplets Resolving") with the searchable and fuzzy triplets, the retrieved passages
       and propositions and the resolved triplets -> "Fully Resolved" and "Newly Searchable" clues;
   2.3 update: resolved ∪= new resolved; searchable = new searchable; fuzzy = fuzzy \\ (the ones a new clue
       fills in). Stop when no searchable or fuzzy triplet is left.
3. Answer (App. E "Final Answering") from the resolved triplets, plus the remaining searchable ones when the
   loop ended at the iteration cap (§4.3 Step 3 (b)).

Where the paper and its public code (rockcor/T2RAG @ 72c43bd ``src/TRAG.py``, which produced the published
numbers) differ, ``reading: code`` (default, DESIGN.md) follows the code and ``reading: paper`` the prose; each
behaviour is its own key (null = the reading's value; ``READINGS``):
``question_query`` (+ ``question_query_mode``; code 478-487: the lower-cased question without question words,
removed as substrings, is an extra query; paper Alg. 2: searchable triplets only), ``carry_fuzzy`` (code
738-740: the fuzzy set is emptied after every resolve call; paper Step 2.3: carried over),
``resolve_without_context`` (code 622-629: no resolve call when nothing was retrieved; paper Alg. 1: every
iteration), ``example_propositions_chars`` (code 666-668: the example's propositions cut to 1000 characters;
paper App. E: whole) and ``decompose_retry`` (code 375-383, 980-1032: a failed decomposition is retried once
with a simpler prompt, at most 3 triplets kept; paper: no retry) and ``on_no_triplets`` (code 385-396,
1429-1437: with no triplet after that the query fails, no documents and the answer "Error processing query";
paper: answered from no clues) and ``prompt_text`` (code 264-306, 632-725: the code's decomposition and resolve
texts, whose example fills the new clue's object in; paper App. E: "Searchable", the example's object "?") and
``decompose_parse`` (code 319-373: ``s | p | o`` lines after the ``Triples:`` line, three cells, bullets stripped
only when that finds nothing; paper: our lenient repairs) and ``query_placeholders`` (code 466-471, 532: a part
starting with '?' is left out of the query, the others kept verbatim, and candidates with a best similarity <= 0
are skipped; paper: every '?token' removed).
Ablations of Table 2: ``max_iterations=1``
("single round") and ``with_passages=false`` ("w/o chunk").

Our reading of Step 2.3's set difference (fuzzy \\ (new resolved ∪ new searchable)), ``fuzzy_match``:
``placeholder`` (default) first binds the named placeholders a reply clue fills in a searchable triplet
(``?directorA := Michael Curtiz``) and substitutes them into the fuzzy triplets; a new clue then fills a fuzzy
triplet when it has fewer '?', its '?' sit where the fuzzy one's do and the known subject/object agree (word
containment), the predicate compared (one shared content word) only when no entity is known, so a reworded
predicate ("born on" for "was born in") still matches. ``words`` (the earlier reading) needs every known part,
the predicate included, to agree. Each new clue is matched once. Reply clues are re-classified by their
placeholder count (counted as ``reclassified``). ``stall_stop``: the loop stops (``stop = "stalled"``) when
nothing is searchable, nothing was retrieved and the previous step added no clue, instead of calling the
resolver with no context up to N times.

Retrieval output (not evaluated by the paper, §5.2; needed to report Recall@k beside GEAR): each iteration's
passages in retrieval order; the method's ranking is the RRF of the iteration lists (``ranking: rrf``, as
GEAR fuses its rounds, Eq. 9) or their concatenation (``ranking: concat``). Each round record carries the
ranking had T²RAG stopped there (Figure-2-style per-iteration recall).

T²RAG answers by itself: :class:`~gear_repro.methods.base.MethodOutput` carries the answer and the runner
scores it with the same EM/F1 as the QA reader (``answer: false`` leaves answering to ``qa_reader``).
Malformed replies never raise: they are repaired where the intent is clear and counted in
``trace['t2rag']['counters']`` (and ``trace['counters']``: metrics.json ``agent_stats``, the run's warning).
"""

from __future__ import annotations

import logging
import re
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gear_repro.backends.base import Collection
from gear_repro.core.fusion import RRF_K, rrf
from gear_repro.embedding.embedder import Embedder
from gear_repro.llm.base import LLM
from gear_repro.methods.base import MethodAnswer, MethodOutput
from gear_repro.prompts import render
from gear_repro.qa.reader import extract_answer
from gear_repro.retrieval.base import DenseRetriever
from gear_repro.types import Passage, Question, Ranking, Triple
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.settings import Choice, as_dict, choice

log = logging.getLogger(__name__)

RESOLVED, SEARCHABLE, FUZZY = "resolved", "searchable", "fuzzy"
_PLACEHOLDER = re.compile(r"\?[\w'-]*")
_WORD = re.compile(r"\w+")
QUESTION_WORDS = ("what", "who", "where", "when", "why", "how", "which", "whose")  # TRAG.py:481, in its order
_QUESTION_WORDS = re.compile(rf"\b({'|'.join(QUESTION_WORDS)})\b", re.IGNORECASE)
_NAMED = re.compile(r"^\?[\w'-]+$")
_FUNCTION_WORDS = frozenset(("a", "an", "the", "is", "was", "are", "were", "be", "been", "has", "have", "had", "of",
                            "in", "on", "at", "to", "by", "for", "from", "as", "with", "its", "his", "her", "their"))


class T2RAGRanking(Choice):
    """How T²RAG's iteration lists become the method's ranking (agent.ranking)."""

    rrf = "rrf"        # RRF of the iteration lists (as GEAR fuses its rounds, Eq. 9)
    concat = "concat"  # iteration lists in order, de-duplicated


class T2RAGReading(Choice):
    """Which reading sets T²RAG's paper-vs-code behaviours (agent.reading; docs/readings.md)."""

    code = "code"    # rockcor/T2RAG src/TRAG.py, behind the published numbers (default, DESIGN.md)
    paper = "paper"  # the paper's prose (Alg. 1-2, §4.3, App. E)


class T2RAGQuestionQuery(Choice):
    """How question words are removed from the extra question query (agent.question_query_mode)."""

    substring = "substring"  # the code: lower-cased, removed as substrings (TRAG.py:481-485)
    word = "word"            # on word boundaries


class T2RAGDecomposeRetry(Choice):
    """What follows a decomposition with no parsable triplet (agent.decompose_retry)."""

    simple = "simple"  # the code: one retry with the simpler prompt, at most 3 triplets (TRAG.py:375-383)
    none = "none"      # the paper: no retry; answered from no clues


class T2RAGOnNoTriplets(Choice):
    """What a question gets when the decomposition (and its retry) yields no triplet (agent.on_no_triplets)."""

    fail = "fail"      # the code: the query fails (TRAG.py:385-396 raise; 1429-1437: no documents, the answer
                       # FAILED_ANSWER), no answer call
    answer = "answer"  # the paper (no such case in its prose): answered from no clues


FAILED_ANSWER = "Error processing query"  # TRAG.py:1436, the answer recorded for a query that failed


class T2RAGPromptText(Choice):
    """Which texts the decomposition and resolve prompts have (agent.prompt_text)."""

    code = "code"    # TRAG.py:264-306, 641-725: "Traceable", the example's object filled in ("20 March 851"), the
                     # question at the top, a Propositions: request; t2rag_decompose_code, t2rag_resolve_code
    paper = "paper"  # App. E: "Searchable", the example's object "?"; t2rag_decompose, t2rag_resolve


class T2RAGDecomposeParse(Choice):
    """How the decomposition reply is read (agent.decompose_parse)."""

    code = "code"        # TRAG.py:319-373 (parse_decomposition_code)
    lenient = "lenient"  # our repairs (parse_decomposition)


class T2RAGQueryPlaceholders(Choice):
    """How a searchable triplet becomes a query proposition (agent.query_placeholders)."""

    code = "code"    # TRAG.py:466-471: a part is left out when it starts with '?', else kept verbatim; and
                     # candidates with a best similarity <= 0 are skipped (532)
    strip = "strip"  # every '?token' removed from every part


class T2RAGResolveParse(Choice):
    """How a resolve reply is read (agent.resolve_parse)."""

    code = "code"        # TRAG.py:944-978 (parse_resolution_code): headers and field names must start the line
    lenient = "lenient"  # our repairs (parse_resolution)


class T2RAGResolvedUpdate(Choice):
    """Where a clue the resolve reply lists under "Fully Resolved" goes (agent.resolved_update)."""

    code = "code"              # TRAG.py:1231: to the resolved set, whatever '?' it still holds
    reclassify = "reclassify"  # by its own placeholders: 0 resolved, 1 searchable, >= 2 fuzzy (§4.3 Step 1)


class T2RAGPropositionPassage(Choice):
    """Which passages a retrieved proposition brings (agent.proposition_passage)."""

    code = "code"  # TRAG.py:196-210: one passage per proposition text, the last one it was extracted from
    own = "own"    # each triple its own passage (a text extracted from several passages brings each)


class T2RAGFuzzyMatch(Choice):
    """How a new clue fills a fuzzy triplet in Step 2.3 (agent.fuzzy_match)."""

    placeholder = "placeholder"  # bound named placeholders, position and known entities (predicate reworded ok)
    words = "words"              # every known part, the predicate included, agrees word by word


class T2RAGAnswerParse(Choice):
    """How T²RAG's answer is read off the reply (agent.answer_parse)."""

    code = "code"      # after the last "Answer:", else the whole reply (TRAG.py:1117-1119)
    reader = "reader"  # the K.3 reader's first non-empty line (qa.reader.extract_answer)


# reading -> the paper-vs-code behaviours (agent.reading; a key set explicitly overrides its reading)
READINGS: dict[str, dict[str, Any]] = {
    "code": {"question_query": True, "question_query_mode": "substring", "carry_fuzzy": False,
             "resolve_without_context": False, "example_propositions_chars": 1000, "decompose_retry": "simple",
             "on_no_triplets": "fail", "prompt_text": "code", "decompose_parse": "code", "query_placeholders": "code",
             "resolve_parse": "code", "resolved_update": "code", "proposition_passage": "code"},
    "paper": {"question_query": False, "question_query_mode": "word", "carry_fuzzy": True,
              "resolve_without_context": True, "example_propositions_chars": 0, "decompose_retry": "none",
              "on_no_triplets": "answer", "prompt_text": "paper", "decompose_parse": "lenient",
              "query_placeholders": "strip", "resolve_parse": "lenient", "resolved_update": "reclassify",
              "proposition_passage": "own"},
}
_MD = re.compile(r"[*_`#]+")
# prompt_text -> (decomposition, resolve) templates
PROMPTS = {"code": ("t2rag_decompose_code", "t2rag_resolve_code"), "paper": ("t2rag_decompose", "t2rag_resolve")}
CODE_MARGIN = " " * 8  # the code's resolve prompt is an indented f-string (TRAG.py:666-725): its lines' margin
CODE_FUZZY_MARGIN = " " * 12  # and its fuzzy clue blocks' (643-648)


# -- triplets -------------------------------------------------------------------------------------------------
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


# -- reply parsing --------------------------------------------------------------------------------------------
def _clean(part: str) -> str:
    return _MD.sub("", part).strip().strip("\"'“”‘’[]()").strip()


def _template_echo(parts: Sequence[str]) -> bool:
    """A part left as the template's "..." (the reply copied the format instead of filling it)."""
    return any(p.strip(" .…") == "" for p in parts)


def _triple_from_line(line: str, allow_commas: bool) -> Clue | None:
    line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", _MD.sub("", line)).strip()
    line = re.sub(r"^(?:triples?|triplets?)\s*(?:\d+)?\s*:\s*", "", line, flags=re.IGNORECASE)
    if "|" in line:
        parts = [_clean(p) for p in line.split("|")]
        parts = [p for p in parts if p]
        if len(parts) < 3 or _template_echo(parts):
            return None
        # more than three cells: the middle ones belong to the predicate
        return Clue(parts[0], " ".join(parts[1:-1]), parts[-1])
    if allow_commas:
        parts = [_clean(p) for p in line.strip("()").split(",")]
        if len(parts) == 3 and all(parts) and not _template_echo(parts):
            return Clue(*parts)
    return None


@dataclass
class Parsed:
    """Clues read off a reply and how: ``ok`` (the requested format), ``repaired`` or ``failed``."""

    clues: list[Clue] = field(default_factory=list)
    searchable: list[Clue] = field(default_factory=list)
    status: str = "ok"


def parse_decomposition(text: str | None) -> Parsed:
    """Triplets of a decomposition reply (App. E): ``s | p | o`` lines after "Triples:".

    Repairs: triplets on the "Triples:" line itself or separated by ';', bullets/numbering/Markdown, more than
    three cells (middle cells joined into the predicate), and, inside the Triples section, ``(s, p, o)`` or
    ``s, p, o`` lines; ``|`` lines anywhere when there is no "Triples:" header.
    """
    if not text or not text.strip():
        return Parsed(status="failed")
    lines = _MD.sub("", text).splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(r"\s*triples?\s*:", ln, re.IGNORECASE)), None)
    section = lines[start:] if start is not None else lines
    clues: list[Clue] = []
    repaired = start is None
    for raw in section:
        if re.match(r"\s*(reasoning|propositions?)\s*:", raw, re.IGNORECASE) and clues:
            break  # the code's "Propositions:" section or a second reasoning block ends the triplets
        for piece in raw.split(";"):
            c = _triple_from_line(piece, allow_commas=start is not None)
            if c is not None:
                repaired |= "|" not in piece or ";" in raw
                clues.append(c)
    clues = dedupe(clues)
    if not clues:
        return Parsed(status="failed")
    return Parsed(clues=clues, status="repaired" if repaired else "ok")


_CODE_SECTIONS = ("Reasoning:", "Triples:", "Propositions:")  # TRAG.py:324-331, case-sensitive line starts


def _code_clue(line: str, strip_quotes: bool = False) -> Clue | None:
    """The first three ``|`` cells of ``line`` (more are ignored, fewer give nothing), stripped (and of quotes)."""
    cells = [c.strip() for c in line.split("|")]
    if strip_quotes:
        cells = [c.strip('"').strip("'") for c in cells]
    return Clue(*cells[:3]) if len(cells) >= 3 else None


def parse_decomposition_code(text: str | None) -> Parsed:
    """Triplets of a decomposition reply as TRAG.py:319-373 reads them (``decompose_parse: code``).

    Primary pass: each stripped line; one starting with ``Reasoning:``, ``Triples:`` or ``Propositions:`` opens
    that section and is not parsed itself; in the Triples section a line with ``|`` and at least three cells gives
    (cells 0, 1, 2), nothing stripped but spaces. Only when that finds nothing, the secondary pass (status
    ``repaired``): every ``|`` line outside the three headers (case-insensitive), cut after its first ``". "``,
    every ``"- "`` removed, cells stripped of quotes. De-duplicated as every decomposition (398-417)."""
    lines = [ln.strip() for ln in (text or "").strip().split("\n")]
    section = None
    clues: list[Clue] = []
    for line in lines:
        head = next((h for h in _CODE_SECTIONS if line.startswith(h)), None)
        if head is not None:
            section = head
        elif section == "Triples:" and "|" in line and (c := _code_clue(line)) is not None:
            clues.append(c)
    if clues:
        return Parsed(clues=dedupe(clues), status="ok")
    for line in lines:
        if not line or "|" not in line or line.lower().startswith(tuple(h.lower() for h in _CODE_SECTIONS)):
            continue
        if ". " in line:
            line = line.split(". ", 1)[1]
        c = _code_clue(line.replace("- ", ""), strip_quotes=True)
        if c is not None:
            clues.append(c)
    return Parsed(clues=dedupe(clues), status="repaired" if clues else "failed")


_HEADER = re.compile(r"(fully\s+resolved|newly\s+(?:searchable|traceable))\s+clues?\s*(?:\d+)?\s*[:.-]?",
                     re.IGNORECASE)
# any "<label> Clue n:" line, e.g. the prompt's "Fuzzy Clue 2:" echoed back: it ends the previous block
_ANY_HEADER = re.compile(r"^[ \t]*[A-Za-z][A-Za-z ]*?\bclues?\s*\d*\s*:", re.IGNORECASE | re.MULTILINE)
_SPO = re.compile(r"subject\s*:\s*(?P<s>.*?)\s*predicate\s*:\s*(?P<p>.*?)\s*object\s*:\s*(?P<o>.*?)\s*"
                  r"(?=subject\s*:|$)", re.IGNORECASE | re.DOTALL)


def _spo_clues(segment: str) -> list[Clue]:
    out = []
    for m in _SPO.finditer(segment):
        s, p, o = (_clean(next((ln for ln in m.group(g).splitlines() if ln.strip()), "")) for g in "spo")
        if s and p and o and not _template_echo((s, p, o)):
            out.append(Clue(s, p, o))
    return out


def parse_resolution(text: str | None) -> Parsed:
    """"Fully Resolved Clue n" / "Newly Searchable Clue n" blocks (App. E) of a resolve reply.

    Accepts Subject/Predicate/Object on one line or on separate lines, Markdown emphasis, the code's
    "Newly Traceable" wording; other "... Clue n:" blocks (e.g. the prompt's fuzzy clues echoed back) are
    ignored. When no such header is present, ``s | p | o`` lines classified by their
    placeholders (``repaired``). ``clues`` holds the fully resolved ones, ``searchable`` the newly searchable.
    """
    if not text or not text.strip():
        return Parsed(status="failed")
    body = _MD.sub("", text)
    heads = list(_HEADER.finditer(body))
    if heads:
        resolved: list[Clue] = []
        searchable: list[Clue] = []
        starts = sorted({m.start() for m in _ANY_HEADER.finditer(body)} | {h.start() for h in heads})
        for h in heads:
            end = next((x for x in starts if x > h.start()), len(body))
            seg = body[h.end(): max(end, h.end())]
            seg = re.split(r"\(continue numbering", seg, flags=re.IGNORECASE)[0]
            found = _spo_clues(seg)
            if not found:
                c = next((x for x in (_triple_from_line(ln, False) for ln in seg.splitlines()) if x), None)
                found = [c] if c else []
            (resolved if h.group(1).lower().startswith("fully") else searchable).extend(found[:1])
        if resolved or searchable:
            return Parsed(clues=resolved, searchable=searchable, status="ok")
    loose = [c for c in (_triple_from_line(ln, False) for ln in body.splitlines()) if c is not None]
    loose += _spo_clues(body) if not loose else []
    if not loose:
        if re.search(r"\bnone\b", body, re.IGNORECASE) and len(body) < 200:
            return Parsed(status="ok")  # "None" / "no clues could be resolved": an answer, not a format error
        return Parsed(status="failed")
    return Parsed(clues=[c for c in loose if c.kind == RESOLVED],
                  searchable=[c for c in loose if c.kind != RESOLVED], status="repaired")


# prompt_text -> the "new clue" headers the strict parse accepts: the code's, and App. E's wording when it was asked for
NEW_CLUE_HEADERS = {"code": ("Newly Traceable Clue",), "paper": ("Newly Traceable Clue", "Newly Searchable Clue")}
_CODE_FIELDS = (("Subject:", "subject"), ("Predicate:", "predicate"), ("Object:", "object"))


def parse_resolution_code(text: str | None, new_headers: tuple[str, ...] = ("Newly Traceable Clue",)) -> Parsed:
    """A resolve reply read as the authors' code reads it (TRAG.py:944-978, ``_parse_combined_clue_response``).

    Each line is stripped; one starting with "Fully Resolved Clue" or one of ``new_headers`` ("Newly Traceable
    Clue", the code's; the agent adds "Newly Searchable Clue" when it sent App. E's prompt text) opens a clue, and "Subject:", "Predicate:", "Object:" at
    the start of a line set its fields (the rest of the line, stripped, kept verbatim: quotes, '?' and all; a later
    line of the same field, even of an echoed "Fuzzy Clue", overwrites it). A clue is kept only with all three
    fields when the next header or the reply ends. Nothing else is read: no Markdown, no fields on one line, no
    ``s | p | o`` lines. ``status`` is ``ok`` when a clue was kept, else ``failed``."""
    if not text or not text.strip():
        return Parsed(status="failed")
    resolved: list[Clue] = []
    searchable: list[Clue] = []
    section: str | None = None
    fields: dict[str, str] = {}

    def close() -> None:
        if section is not None and len(fields) == 3:
            (resolved if section == RESOLVED else searchable).append(
                Clue(fields["subject"], fields["predicate"], fields["object"]))

    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("Fully Resolved Clue", *new_headers)):
            close()
            section = RESOLVED if line.startswith("Fully Resolved Clue") else SEARCHABLE
            fields = {}
            continue
        for label, key in _CODE_FIELDS:
            if line.startswith(label):
                fields[key] = line.split(label, 1)[1].strip()
                break
    close()
    return Parsed(clues=resolved, searchable=searchable, status="ok" if resolved or searchable else "failed")


# -- triplet state (Alg. 1) -----------------------------------------------------------------------------------
@dataclass
class TripletState:
    """The three sets of Alg. 1: resolved, searchable and fuzzy triplets."""

    resolved: list[Clue] = field(default_factory=list)
    searchable: list[Clue] = field(default_factory=list)
    fuzzy: list[Clue] = field(default_factory=list)

    @classmethod
    def from_clues(cls, clues: Sequence[Clue]) -> TripletState:
        """Classify decomposed triplets by their number of placeholders (§4.3 Step 1)."""
        clues = dedupe(clues)
        return cls([c for c in clues if c.kind == RESOLVED], [c for c in clues if c.kind == SEARCHABLE],
                   [c for c in clues if c.kind == FUZZY])

    @property
    def open(self) -> bool:
        """The loop condition of Alg. 1: |searchable ∪ fuzzy| > 0."""
        return bool(self.searchable or self.fuzzy)

    def update(self, new_resolved: Sequence[Clue], new_searchable: Sequence[Clue],
               carry_fuzzy: bool = True, fuzzy_match: str = "placeholder",
               resolved_update: str = "reclassify") -> dict[str, int]:
        """Step 2.3: resolved ∪= new resolved; searchable = new searchable; fuzzy \\= filled-in ones.

        Reply clues are re-classified by their placeholders first. A reply clue that resolves a searchable
        triplet fills no fuzzy one. ``fuzzy_match="placeholder"``: the named placeholders such clues fill are
        substituted into the fuzzy triplets, the others fill fuzzy triplets by :meth:`Clue.fills_slot`, and a
        fuzzy triplet left with one '?' by the substitution becomes searchable (``fuzzy_bound``); ``"words"``:
        :meth:`Clue.fills_in`. With ``carry_fuzzy=False`` (the authors' code, TRAG.py:738-740) the fuzzy set
        is emptied instead; fuzzy-looking reply clues are then dropped too (TRAG.py:1236-1244).
        ``resolved_update="code"`` (TRAG.py:1231 ``current_resolved_clues.extend(clues_result['resolved_clues'])``):
        a clue the reply lists as fully resolved joins the resolved set even with a '?' left (counted
        ``resolved_with_placeholder``); only the newly searchable ones are classified by their '?' (1236-1244).
        Returns counters: reclassified, resolved_with_placeholder, fuzzy_filled, fuzzy_bound, new_fuzzy, dropped_fuzzy.
        """
        counts = {"reclassified": 0, "resolved_with_placeholder": 0, "fuzzy_filled": 0, "fuzzy_bound": 0,
                  "new_fuzzy": 0, "dropped_fuzzy": 0}
        reported = [(c, RESOLVED) for c in new_resolved] + [(c, SEARCHABLE) for c in new_searchable]
        by_kind: dict[str, list[Clue]] = {RESOLVED: [], SEARCHABLE: [], FUZZY: []}
        for c, said in reported:
            kind = RESOLVED if resolved_update == "code" and said == RESOLVED else c.kind
            counts["resolved_with_placeholder"] += kind == RESOLVED and c.kind != RESOLVED
            counts["reclassified"] += kind != said
            by_kind[kind].append(c)
        remaining = list(self.fuzzy)
        if carry_fuzzy:
            by_slot = fuzzy_match == "placeholder"

            def fills(c: Clue, f: Clue, bound: Clue) -> bool:
                return c.fills_slot(f, bound) if by_slot else c.fills_in(f)

            binding: dict[str, str] = {}
            unmatched = []
            for c in by_kind[RESOLVED] + by_kind[SEARCHABLE]:
                hit = next((s for s in self.searchable if fills(c, s, s)), None)
                if hit is None:
                    unmatched.append(c)
                elif by_slot:
                    binding.update(c.bindings(hit))
            pairs = [(f, f.substitute(binding)) for f in remaining]
            for c in unmatched:
                pair = next((fb for fb in pairs if fills(c, *fb)), None)
                if pair is not None:
                    pairs.remove(pair)
                    counts["fuzzy_filled"] += 1
            remaining = []
            for _, b in pairs:
                if b.kind == FUZZY:
                    remaining.append(b)
                else:  # a bound placeholder left it searchable (or resolved)
                    by_kind[b.kind].append(b)
                    counts["fuzzy_bound"] += 1
            known = {f.key for f in remaining}
            new_fuzzy = [c for c in dedupe(by_kind[FUZZY]) if c.key not in known]
            counts["new_fuzzy"] = len(new_fuzzy)
            remaining += new_fuzzy
        else:
            counts["dropped_fuzzy"] = len(remaining) + len(by_kind[FUZZY])
            remaining = []
        self.resolved = dedupe(self.resolved + by_kind[RESOLVED])
        self.searchable = dedupe(by_kind[SEARCHABLE])
        self.fuzzy = remaining
        return counts

    def answer_context(self) -> list[Clue]:
        """Step 3: resolved triplets; plus the remaining searchable ones when the loop hit the cap."""
        return list(self.resolved) if not self.open else dedupe(self.resolved + self.searchable)

    def to_dict(self) -> dict[str, list[list[str]]]:
        return {k: [list(c.parts) for c in getattr(self, k)] for k in (RESOLVED, SEARCHABLE, FUZZY)}


# -- adaptive retrieval (Alg. 2) ------------------------------------------------------------------------------
@dataclass
class Retrieved:
    """Output of Alg. 2: propositions (text, best score, passages) and the unique passages, best first."""

    propositions: list[dict[str, Any]] = field(default_factory=list)
    passages: Ranking = field(default_factory=Ranking)


def adaptive_retrieve(retriever: Any, triple_passage: dict[str, str], triple_text: dict[str, str],
                      queries: Sequence[str], k: int, depth: int, positive_only: bool = False) -> Retrieved:
    """Alg. 2: pool the top-``depth`` propositions of every query, rank them by their best similarity, take
    them in that order until ``k`` unique passages are reached (checked before each proposition, line 11);
    ``positive_only`` skips a proposition whose best similarity is <= 0 (TRAG.py:532).

    Propositions are triple ids of the triple collection, so a text extracted from several passages brings
    each of its passages; the returned list names a text once (its best score, all its passages taken).
    """
    queries = [q for q in dict.fromkeys(queries) if q.strip()]
    if not queries or k < 1:
        return Retrieved()
    best: dict[str, float] = {}
    order: dict[str, int] = {}
    for rank in retriever.retrieve_many(queries, depth):
        for tid, score in zip(rank.ids, rank.scores, strict=True):
            order.setdefault(tid, len(order))
            best[tid] = max(best.get(tid, float("-inf")), float(score))
    passages: dict[str, float] = {}
    props: dict[str, dict[str, Any]] = {}
    for tid in sorted(best, key=lambda t: (-best[t], order[t])):
        if len(passages) >= k:
            break
        pid = triple_passage.get(tid)
        if pid is None or (positive_only and best[tid] <= 0):
            continue
        passages.setdefault(pid, best[tid])
        rec = props.setdefault(triple_text[tid], {"text": triple_text[tid], "score": round(best[tid], 6),
                                                  "passage_ids": []})
        if pid not in rec["passage_ids"]:
            rec["passage_ids"].append(pid)
    return Retrieved(list(props.values()), Ranking(list(passages), list(passages.values())))


def question_query(question: str, mode: str = "word") -> str:
    """The authors' extra query: the question without question words and '?'.

    ``substring`` follows TRAG.py:481-485: lower-cased, each question word removed as a substring in the
    code's order ("Who directed Showboat?" -> "directed sboat"), no space squeezing; ``word`` removes them on
    word boundaries, case kept."""
    if mode == "substring":
        for word in QUESTION_WORDS:
            question = question.lower().replace(word, "").strip()
        return question.replace("?", "").strip()
    return " ".join(_QUESTION_WORDS.sub(" ", question).replace("?", " ").split())


def parse_simple_decomposition(text: str | None) -> Parsed:
    """Triplets of the retry reply (``t2rag_decompose_simple``) as TRAG.py:1008-1028 reads them: every
    ``s | p | o`` line, bullets and numbering stripped, a generic ``? | ...related... | <long object>`` line
    dropped, the first 3 kept (1028), then de-duplicated as every decomposition is (398-417: a repeated line among
    the three leaves fewer). Status ``retried`` or ``failed``."""
    clues = []
    for line in (text or "").splitlines():
        c = _triple_from_line(line, allow_commas=False)
        if c is not None and not (c.subject == "?" and "related" in c.predicate.lower() and len(c.object) > 30):
            clues.append(c)
    clues = dedupe(clues[:3])
    return Parsed(clues=clues, status="retried" if clues else "failed")


def t2rag_trace(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """T²RAG's trace of a prediction record (``trace['t2rag']``); None for another method's record or an error's."""
    trace = record.get("trace")
    return trace.get("t2rag") if isinstance(trace, dict) else None


def loop_counts(traces: Iterable[Mapping[str, Any]]) -> tuple[Counter[int], Counter[str]]:
    """Questions per number of resolve iterations and per stop reason, over T²RAG traces."""
    iterations: Counter[int] = Counter()
    stops: Counter[str] = Counter()
    for t in traces:
        iterations[t.get("iterations", 0)] += 1
        stops[t.get("stop", "?")] += 1
    return iterations, stops


def _code_blocks(clues: Sequence[Clue], label: str, margin: str) -> str:
    """Clue blocks as the code's resolve prompt concatenates them (TRAG.py:641-664): each block on new lines after a
    line break, its lines and the line after it indented by ``margin``."""
    return "".join(f"\n{textwrap.indent(c.block(f'{label} {i + 1}'), margin)}\n{margin}" for i, c in enumerate(clues))


def code_answer(text: str | None) -> str:
    """The answer as TRAG.py:1117-1119 takes it: the text after the last "Answer:", else the whole reply."""
    text = text or ""
    return (text.split("Answer:")[-1] if "Answer:" in text else text).strip()


# -- the method -----------------------------------------------------------------------------------------------
class T2RAGAgent:
    """T²RAG (§4.3, Alg. 1-2). Built by the runner from ``configs/agent/t2rag.yaml`` (each value documented).

    Args:
        llm: the decompose / resolve / answer calls' client.
        embedder: query embeddings of the proposition search.
        triple_collection: the proposition index (the run's triple collection, dense search).
        triples: the dataset's triples (triple -> passage, triple -> text).
        passage_by_id: passage texts of the corpus (resolve context).
        k: unique passages per iteration (§5.2: k = 5).
        max_iterations: N, resolve iterations at most (§5.2: 3; 1 = the "single round" ablation, Table 2).
        candidate_depth: propositions retrieved per query before the global ranking (Alg. 2 ``Search(I, q, N)``).
        with_passages: give the retrieved passages to the resolve prompt (False = "w/o chunk", Table 2).
        reading: ``code`` (rockcor/T2RAG, behind the published numbers) or ``paper`` (the prose): the default of
            the keys below (``READINGS``); each set explicitly (not None) overrides it.
        carry_fuzzy: carry unresolved fuzzy triplets over (paper §4.3 Step 2.3) or drop them (TRAG.py:738-740).
        question_query: also retrieve with the question (TRAG.py:478-487) or not (paper, Alg. 2).
        question_query_mode: ``substring`` (the code) or ``word`` (question words removed on word boundaries).
        resolve_without_context: call the resolver when nothing was retrieved (paper, Alg. 1) or skip it
            (TRAG.py:622-629).
        example_propositions_chars: cut the example's propositions to this many characters (0 = whole, as
            the paper's template; TRAG.py:668 cuts at 1000).
        decompose_retry: ``simple`` (retry a failed decomposition with ``t2rag_decompose_simple``, TRAG.py:375-383)
            or ``none`` (the paper).
        on_no_triplets: no triplet after the decomposition (and its retry): ``fail`` (the code: no retrieval, no
            answer call, the answer :data:`FAILED_ANSWER`, TRAG.py:385-396, 1429-1437) or ``answer`` (from no clues).
        prompt_text: ``code`` (the decomposition and resolve prompts are the code's texts, TRAG.py:264-306,
            632-725: ``t2rag_decompose_code``, ``t2rag_resolve_code``) or ``paper`` (App. E: ``t2rag_decompose``,
            ``t2rag_resolve``). The answer prompt is the same in both (TRAG.py:1091-1109).
        decompose_parse: ``code`` (:func:`parse_decomposition_code`, TRAG.py:319-373) or ``lenient``
            (:func:`parse_decomposition`, our repairs).
        query_placeholders: ``code`` (a part starting with '?' left out of the query, the others verbatim,
            TRAG.py:466-471; candidates with a best similarity <= 0 skipped, 532) or ``strip`` (every '?token' removed).
        resolve_parse: ``code`` (:func:`parse_resolution_code`, TRAG.py:944-978: headers and field names at the
            start of a line) or ``lenient`` (:func:`parse_resolution`, our repairs).
        resolved_update: ``code`` (a clue listed as fully resolved is resolved even with a '?', TRAG.py:1231) or
            ``reclassify`` (every reply clue classified by its placeholders; :meth:`TripletState.update`).
        proposition_passage: ``code`` (a proposition text brings one passage, the last it was extracted from in the
            triples' order, TRAG.py:196-210 ``proposition_to_passage[proposition] = ...``) or ``own`` (each triple
            its own passage).
        fuzzy_match: ``placeholder`` or ``words`` (:meth:`TripletState.update`).
        stall_stop: stop when nothing is searchable, nothing was retrieved and the last step added no clue.
        answer: produce T²RAG's own answer (Step 3); False leaves answering to ``qa_reader`` (qa=true).
        answer_parse: ``code`` (text after the last "Answer:", else the whole reply; TRAG.py:1117-1119) or
            ``reader`` (the K.3 reader's first line, ``qa.reader.extract_answer``).
        ranking: ``rrf`` (RRF of the iteration lists) or ``concat`` (iteration lists in order).
        k_rrf: RRF constant.
        llm_params: extra ``llm.chat`` keyword arguments (temperature 0 comes from the llm group, App. B.1).
    """

    name = "t2rag"
    k_dependent = False

    needs_llm = True
    needs_vectors = True  # the proposition search is dense (§4.2)

    def __init__(self, llm: LLM, embedder: Embedder, triple_collection: Collection, triples: Sequence[Triple],
                 passage_by_id: Mapping[str, Passage], name: str = "t2rag", k: int = 5, max_iterations: int = 3,
                 candidate_depth: int = 200, with_passages: bool = True, reading: str = "code",
                 carry_fuzzy: bool | None = None, question_query: bool | None = None,
                 question_query_mode: str | None = None, resolve_without_context: bool | None = None,
                 example_propositions_chars: int | None = None, decompose_retry: str | None = None,
                 on_no_triplets: str | None = None, prompt_text: str | None = None,
                 decompose_parse: str | None = None, query_placeholders: str | None = None,
                 resolve_parse: str | None = None, resolved_update: str | None = None,
                 proposition_passage: str | None = None, fuzzy_match: str = "placeholder", stall_stop: bool = True, answer: bool = True,
                 answer_parse: str = "code", ranking: str = "rrf", k_rrf: int = RRF_K, llm_params: Any = None):
        if k < 1 or max_iterations < 1 or candidate_depth < 1:
            raise ConfigError(f"agent.k, agent.max_iterations and agent.candidate_depth must be >= 1 "
                              f"(got {k}, {max_iterations}, {candidate_depth})")
        self.name = name
        self.llm = llm
        self.embedder = embedder
        self.triple_collection = triple_collection
        self.triples = triples
        self.passage_by_id = passage_by_id
        self.k, self.max_iterations, self.candidate_depth = int(k), int(max_iterations), int(candidate_depth)
        self.reading = choice(T2RAGReading, reading, "agent.reading").value
        given = {"question_query": question_query, "question_query_mode": question_query_mode,
                 "carry_fuzzy": carry_fuzzy, "resolve_without_context": resolve_without_context,
                 "example_propositions_chars": example_propositions_chars, "decompose_retry": decompose_retry,
                 "on_no_triplets": on_no_triplets, "prompt_text": prompt_text, "decompose_parse": decompose_parse,
                 "query_placeholders": query_placeholders, "resolve_parse": resolve_parse,
                 "resolved_update": resolved_update, "proposition_passage": proposition_passage}
        s = {key: READINGS[self.reading][key] if v is None else v for key, v in given.items()}
        if int(s["example_propositions_chars"]) < 0:
            raise ConfigError(f"agent.example_propositions_chars must be >= 0 (0 = whole), got "
                              f"{s['example_propositions_chars']}")
        self.with_passages = with_passages
        self.carry_fuzzy, self.question_query = bool(s["carry_fuzzy"]), bool(s["question_query"])
        self.question_query_mode = choice(T2RAGQuestionQuery, s["question_query_mode"],
                                          "agent.question_query_mode").value
        self.resolve_without_context = bool(s["resolve_without_context"])
        self.example_propositions_chars = int(s["example_propositions_chars"])
        self.decompose_retry = choice(T2RAGDecomposeRetry, s["decompose_retry"], "agent.decompose_retry").value
        self.on_no_triplets = choice(T2RAGOnNoTriplets, s["on_no_triplets"], "agent.on_no_triplets").value
        self.prompt_text = choice(T2RAGPromptText, s["prompt_text"], "agent.prompt_text").value
        self.decompose_parse = choice(T2RAGDecomposeParse, s["decompose_parse"], "agent.decompose_parse").value
        self.query_placeholders = choice(T2RAGQueryPlaceholders, s["query_placeholders"],
                                         "agent.query_placeholders").value
        self.resolve_parse = choice(T2RAGResolveParse, s["resolve_parse"], "agent.resolve_parse").value
        self.resolved_update = choice(T2RAGResolvedUpdate, s["resolved_update"], "agent.resolved_update").value
        self.proposition_passage = choice(T2RAGPropositionPassage, s["proposition_passage"],
                                          "agent.proposition_passage").value
        self.fuzzy_match = choice(T2RAGFuzzyMatch, fuzzy_match, "agent.fuzzy_match").value
        self.stall_stop = bool(stall_stop)
        self.answers_questions = answer  # the runner scores EM/F1 of this method's own answers
        self.answer_parse = choice(T2RAGAnswerParse, answer_parse, "agent.answer_parse").value
        self.ranking, self.k_rrf = choice(T2RAGRanking, ranking, "agent.ranking").value, k_rrf
        self.llm_params = as_dict(llm_params)
        llm.check_params(self.llm_params, "agent.llm_params")  # a param the API lacks: one error now, not one per call
        self._maps: tuple[dict[str, str], dict[str, str]] | None = None
        self._retriever: DenseRetriever | None = None

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: not fitted (its prompts hold propositions, not passages)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (§5.2 / B.1 defaults and the paper-vs-code switches as resolved from
        ``reading``)."""
        return {"name": self.name, "k": self.k, "max_iterations": self.max_iterations,
                "candidate_depth": self.candidate_depth, "with_passages": self.with_passages,
                "reading": self.reading, "carry_fuzzy": self.carry_fuzzy, "question_query": self.question_query,
                "question_query_mode": self.question_query_mode,
                "resolve_without_context": self.resolve_without_context,
                "example_propositions_chars": self.example_propositions_chars,
                "decompose_retry": self.decompose_retry, "on_no_triplets": self.on_no_triplets,
                "prompt_text": self.prompt_text, "decompose_parse": self.decompose_parse,
                "query_placeholders": self.query_placeholders, "resolve_parse": self.resolve_parse,
                "resolved_update": self.resolved_update, "proposition_passage": self.proposition_passage,
                "fuzzy_match": self.fuzzy_match,
                "stall_stop": self.stall_stop, "answer": self.answers_questions, "answer_parse": self.answer_parse,
                "ranking": self.ranking, "k_rrf": self.k_rrf}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """For run.json after the questions: the iteration histogram ({iterations: questions}) and stop reasons of
        the run's finished records (all of a resumed run's, as the report's ``t2rag_stats``)."""
        iterations, stops = loop_counts(t for r in records if (t := t2rag_trace(r)) is not None)
        return {"iterations_hist": {str(n): c for n, c in sorted(iterations.items())}, "stops": dict(sorted(stops.items()))}

    @property
    def max_rounds(self) -> int:
        """Rounds of the per-round recall (the runner's ``recall@k_by_round``): the N iterations."""
        return self.max_iterations

    # -- the proposition index --------------------------------------------------------------------------------
    def _index(self) -> tuple[DenseRetriever, dict[str, str], dict[str, str]]:
        """The proposition index (§4.2): dense search over the triple collection, triple -> passage/text. With
        ``proposition_passage: code`` every triple of one text maps to the passage of the last such triple in the
        triples' order, as TRAG.py:196-210 keys ``proposition_to_passage`` by the text (a later passage overwrites)."""
        if self._retriever is None:
            triples = self.triples
            text_of = {t.id: t.text for t in triples}
            if self.proposition_passage == "code":
                last = {t.text: t.passage_id for t in triples}  # dict assignment: the last passage wins
                passage_of = {t.id: last[text_of[t.id]] for t in triples}
            else:
                passage_of = {t.id: t.passage_id for t in triples}
            self._maps = (passage_of, text_of)
            self._retriever = DenseRetriever(self.triple_collection, self.embedder)
        assert self._maps is not None
        return self._retriever, *self._maps

    def _chat(self, messages: list[dict], stage: str, iteration: int) -> str:
        return self.llm.chat(messages, stage=stage, round_no=iteration, **self.llm_params).text

    # -- prompts ----------------------------------------------------------------------------------------------
    def decompose_messages(self, question: str) -> list[dict]:
        """App. E "Structured Query Decomposition" (Step 1), or the code's text (TRAG.py:264-306)."""
        return render(PROMPTS[self.prompt_text][0], query=question)

    def resolve_messages(self, question: str, state: TripletState, retrieved: Retrieved) -> list[dict]:
        """App. E "Triplets Resolving" with the current sets and the retrieved context (Step 2.2); with
        ``prompt_text: code`` the code's text and layout (TRAG.py:632-725): "Traceable" clue blocks, the fuzzy ones
        indented as its f-string has them, empty lists left empty and the resolved clues' section (with its own
        header) only when some are resolved."""
        code = self.prompt_text == "code"
        none = "" if code else "None"
        by_id = self.passage_by_id
        props = "\n".join(f"- {p['text']}" for p in retrieved.propositions) or none
        cut = self.example_propositions_chars  # TRAG.py:668 `context_propositions[:1000]`; 0 = whole (App. E)
        example = props[:cut] if cut else props
        margin = CODE_MARGIN if code else ""
        section = ""
        if self.with_passages:
            texts = "\n".join(f"- {by_id[p].content}" for p in retrieved.passages.ids if p in by_id) or none
            section = f"Context Passages:\n{margin}{texts}\n\n{margin}"
        resolved = "\n".join(f"- {c.pipe()}" for c in state.resolved)
        if code:
            clues = {"traceable": _code_blocks(state.searchable, "Traceable Clue", ""),
                     "fuzzy": _code_blocks(state.fuzzy, "Fuzzy Clue", CODE_FUZZY_MARGIN),
                     "resolved_section": render("t2rag_resolve_code_resolved", resolved=resolved)[0]["content"]
                     if resolved else ""}
        else:
            clues = {"searchable": "\n".join(c.block(f"Searchable Clue {i + 1}") for i, c in enumerate(state.searchable))
                     or none, "fuzzy": "\n".join(c.block(f"Fuzzy Clue {i + 1}") for i, c in enumerate(state.fuzzy))
                     or none, "resolved": resolved or none}
        return render(PROMPTS[self.prompt_text][1], example_propositions=example, query=question,
                      passages_section=section, propositions=props, **clues)

    def answer_messages(self, question: str, clues: Sequence[Clue]) -> list[dict]:
        """App. E "Final Answering" (Step 3; the code's text is the same, TRAG.py:1091-1109); clues as
        "Clue n: s | p | o" lines (the code's layout), "None" for no clue (``prompt_text: code``: empty, 1085-1088)."""
        lines = "\n".join(f"Clue {i + 1}: {c.pipe()}" for i, c in enumerate(clues))
        return render("t2rag_answer", query=question, clues=lines or ("" if self.prompt_text == "code" else "None"))

    # -- Alg. 1 -----------------------------------------------------------------------------------------------
    def run(self, question: Question, k: int | None = None) -> MethodOutput:
        """Answer ``question`` (Alg. 1). ``k`` from the runner is ignored: T²RAG retrieves ``self.k`` unique
        passages per iteration (its ranking holds up to k × iterations passages)."""
        t0 = time.perf_counter()
        q = question.question
        counters: dict[str, int] = {}

        def bump(key: str, n: int = 1) -> None:
            if n:
                counters[key] = counters.get(key, 0) + n

        raw = self._chat(self.decompose_messages(q), "decompose", 0)
        dec = parse_decomposition_code(raw) if self.decompose_parse == "code" else parse_decomposition(raw)
        bump(f"decompose_{dec.status}")
        retry_raw = None
        if dec.status == "failed" and self.decompose_retry == "simple":  # TRAG.py:375-383
            retry_raw = self._chat(render("t2rag_decompose_simple", query=q), "decompose_retry", 0)
            dec = parse_simple_decomposition(retry_raw)
            bump(f"decompose_retry_{'ok' if dec.clues else 'failed'}")
        state = TripletState.from_clues(dec.clues)
        trace: dict[str, Any] = {"decomposition": {"raw": raw, "status": dec.status, "state": state.to_dict(),
                                                   **({"retry_raw": retry_raw} if retry_raw is not None else {})}}
        rounds: list[dict[str, Any]] = []
        lists: list[Ranking] = []
        retriever, passage_of, text_of = self._index()
        iteration = 0
        progress, stalled = bool(dec.clues), False
        while state.open and iteration < self.max_iterations:
            queries = [c.query_for(self.query_placeholders) for c in state.searchable]
            if self.question_query:  # TRAG.py:478-487
                queries.append(question_query(q, self.question_query_mode))
            got = adaptive_retrieve(retriever, passage_of, text_of, queries, self.k, self.candidate_depth,
                                    positive_only=self.query_placeholders == "code")
            if self.stall_stop and not state.searchable and not got.passages.ids and not progress:
                stalled = True  # nothing to search, nothing retrieved, nothing new since the last resolve
                break
            iteration += 1
            lists.append(got.passages)
            rec: dict[str, Any] = {"round": iteration, "queries": queries, "passages": got.passages.ids,
                                   "propositions": got.propositions, "input": state.to_dict()}
            if got.propositions or self.resolve_without_context:
                reply = self._chat(self.resolve_messages(q, state, got), "resolve", iteration)
                res = (parse_resolution_code(reply, NEW_CLUE_HEADERS[self.prompt_text])
                       if self.resolve_parse == "code" else parse_resolution(reply))
                bump(f"resolve_{res.status}")
                rec.update(reply=reply, status=res.status, new_resolved=[list(c.parts) for c in res.clues],
                           new_searchable=[list(c.parts) for c in res.searchable])
                for key, n in state.update(res.clues, res.searchable, self.carry_fuzzy, self.fuzzy_match,
                                           self.resolved_update).items():
                    bump(key, n)
                progress = bool(res.clues or res.searchable)
            else:  # TRAG.py:622-629: no call, the clues stay as they were
                bump("resolve_skipped")
                rec.update(reply=None, status="skipped", new_resolved=[], new_searchable=[])
                progress = False
            rec["state"] = state.to_dict()
            rec["ranking"] = self._fuse(lists).ids
            rounds.append(rec)
        stop = ("no_triplets" if not dec.clues else "stalled" if stalled else
                "all_resolved" if not state.open else "max_iterations")
        trace.update(stop=stop, iterations=iteration, counters=counters, final_state=state.to_dict())
        answer = None
        if self.answers_questions and not dec.clues and self.on_no_triplets == "fail":
            bump("query_failed")  # TRAG.py:1429-1437: the reference records this answer and no documents
            answer = MethodAnswer(text=FAILED_ANSWER, raw="")
        elif self.answers_questions:
            context = state.answer_context()
            reply = self._chat(self.answer_messages(q, context), "answer", 0)
            text = code_answer(reply) if self.answer_parse == "code" else extract_answer(reply)
            answer = MethodAnswer(text=text, raw=reply)
            trace["answer_context"] = [list(c.parts) for c in context]
        trace["timings"] = {"total_s": round(time.perf_counter() - t0, 6)}
        # the counters also where metrics.json's agent_stats and the run's warning read them (report hooks)
        return MethodOutput(ranking=self._fuse(lists), rounds=rounds, trace={"t2rag": trace, "counters": counters},
                            answer=answer)

    def _fuse(self, lists: Sequence[Ranking]) -> Ranking:
        if self.ranking == "concat":
            ids = list(dict.fromkeys(p for lst in lists for p in lst.ids))
            return Ranking(ids, [float(len(ids) - i) for i in range(len(ids))])
        return rrf(list(lists), k_rrf=self.k_rrf) if lists else Ranking()


__all__ = ["FAILED_ANSWER", "READINGS", "Clue", "Parsed", "Retrieved", "T2RAGAgent", "TripletState", "adaptive_retrieve", "code_answer",
           "loop_counts", "t2rag_trace",
           "parse_decomposition", "parse_decomposition_code", "parse_resolution", "parse_resolution_code",
           "parse_simple_decomposition", "question_query"]
