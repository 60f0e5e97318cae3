"""Converters from native multi-hop QA formats to the canonical records (DESIGN.md "Datasets").

Every converter has the signature ``convert_x(questions, corpus=None, limit=None, alias_file=None,
dataset=None) -> Converted`` and is registered in ``FORMATS``. ``docs/data.md`` documents formats, id schemes and
gold matching.

Passage ids: with a corpus file, ``str(id)`` if every record has ``id``, else ``str(idx)`` if every
record has ``idx``, else the 0-based position in the file. Without one, the corpus is the union of
the questions' paragraphs, de-duplicated by exact (title, text), numbered "0", "1", ... in order of
first appearance. Gold passages are matched on normalised (title, text), then on normalised text
alone (unique match only), or, when the source gives a title only, on normalised title. Gold that
matches nothing is kept as ``missing:<title>`` so recall counts it as a miss and never inflates.
A title-only reference that no corpus title equals (2Wiki's evidence subjects are Wikidata labels, its corpus has
Wikipedia page titles) may be matched loosely on request (``match_titles``, off by default: :class:`TitleMatcher`).
"""

from __future__ import annotations

import bisect
import difflib
import json
import logging
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gear_repro.data.canonical import answer_text
from gear_repro.types import Passage, Question
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import iter_jsonl, read_json, require_file

log = logging.getLogger(__name__)

MISSING_PREFIX = "missing:"
_HOP_RE = re.compile(r"^(\d+hop\d*)__")
_N_EXAMPLES = 10


# --------------------------------------------------------------------------- normalisation

def norm_text(s: str) -> str:
    """Matching key: NFKC, casefold, whitespace squeezed and trimmed."""
    return " ".join(unicodedata.normalize("NFKC", s).casefold().split())


def norm_title(s: str) -> str:
    """Title key: ``norm_text`` without surrounding quotes (2Wiki evidence has '"When The Stars Go Blue')."""
    return norm_text(s).strip("\"'“”‘’ ")


def join_sentences(sentences: list[str]) -> str:
    """Join sentences with one space where the source has none (HotpotQA keeps leading spaces, 2Wiki not)."""
    out = ""
    for s in sentences:
        if out and s and not out[-1].isspace() and not s[0].isspace():
            out += " "
        out += s
    return out.strip()


def musique_hop_type(qid: str) -> str:
    """MuSiQue hop type: the id part before the first "__" ("2hop", "3hop1", "4hop3"), or ""."""
    m = _HOP_RE.match(qid)
    return m.group(1) if m else ""


# --------------------------------------------------------------------------- reading

def read_records(path: str | Path, what: str = "questions") -> list[tuple[str, dict]]:
    """Records of a JSON list or a JSONL file, each with a reference ("file:line" / "file[i]") for errors."""
    p = require_file(path, f"{what} file")
    with open(p, "rb") as f:
        head = f.read(4096).lstrip()  # bytes: decoding (with file/line on error) is read_json's or iter_jsonl's
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 BOM before a JSON list (read_json names it)
    if not head:
        raise DataError(f"{p}: empty {what} file")
    if head.startswith(b"{") and b"\n" in head.split(b"}", 1)[0]:  # a JSON object across lines: not JSON lines
        data = read_json(p)
        keys = ", ".join(list(data)[:5]) if isinstance(data, dict) else ""
        raise DataError(f"{p}: a JSON object (keys: {keys}), not a list of {what} records nor JSON lines; give the "
                        "list itself (e.g. the value of its data field) or one record per line")
    if head.startswith(b"["):
        data = read_json(p)
        out = []
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise DataError(f"{p}[{i}]: expected a JSON object, got {type(rec).__name__}")
            out.append((f"{p}[{i}]", rec))
        return out
    return [(f"{p}:{n}", rec) for n, rec in iter_jsonl(p)]


def _get(rec: dict, ref: str, *keys: str, typ: type | tuple = str) -> Any:
    for k in keys:
        if k in rec and rec[k] is not None:
            if not isinstance(rec[k], typ):
                raise DataError(f"{ref}: field '{k}' should be {typ}, got {type(rec[k]).__name__}")
            return rec[k]
    raise DataError(f"{ref}: record lacks field {' or '.join(repr(k) for k in keys)}")


def _title(value: Any, ref: str) -> str:
    """A paragraph's title: a string (a number as written; null = ""); a list, object or boolean is a DataError
    naming ``ref`` (it was indexed and matched as its Python text, e.g. "['Paris']")."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DataError(f"{ref}: title should be a string, got {type(value).__name__} ({json.dumps(value)[:60]})")
    return str(value)


def _question_text(rec: dict, ref: str, key: str = "question") -> str:
    """The question's text; a blank one is a DataError naming the record (the run refuses it: never written)."""
    text = _get(rec, ref, key)
    if not text.strip():
        raise DataError(f"{ref}: field '{key}' is blank")
    return text


_TRUE, _FALSE = {"true", "yes", "1"}, {"false", "no", "0", ""}


def _flag(rec: dict, ref: str, key: str, default: bool = False) -> bool:
    """A boolean field: JSON true/false (null or absent = ``default``), 0/1, or the strings true/false/yes/no/1/0 (any
    case); anything else raises DataError naming the record (a string "false" is never true)."""
    value = rec.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise DataError(f"{ref}: field '{key}' should be true or false, got {value!r}")


def _string_list(value: Any, ref: str, key: str) -> list[Any]:
    """A field holding a list of answers; a single string is one answer (never its characters)."""
    if value is None:
        return []
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        return value
    raise DataError(f"{ref}: field '{key}' should be a list of strings, got {type(value).__name__}")


def load_hipporag_corpus(path: str | Path) -> list[Passage]:
    """A corpus file: list/JSONL of {title, text} with optional ``id`` or ``idx`` (see module doc for ids)."""
    recs = read_records(path, "corpus")
    if not recs:
        raise DataError(f"{path}: empty corpus (no passages)")
    key = "id" if all("id" in r for _, r in recs) else "idx" if all("idx" in r for _, r in recs) else None
    out: list[Passage] = []
    seen: dict[str, str] = {}
    for i, (ref, rec) in enumerate(recs):
        pid = str(rec[key]) if key else str(i)
        if pid in seen:
            raise DataError(f"{ref}: duplicate passage id '{pid}' (first at {seen[pid]})")
        seen[pid] = ref
        text = _get(rec, ref, "text", "paragraph_text")
        out.append(Passage(id=pid, title=_title(rec.get("title"), ref), text=text))
    return out


# --------------------------------------------------------------------------- corpus index

class CorpusIndex:
    """Look-ups of passages by normalised (title, text), text, title and "title\\ntext" content."""

    def __init__(self, passages: list[Passage]):
        self.by_key: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.by_text: dict[str, list[str]] = defaultdict(list)
        self.by_title: dict[str, list[str]] = defaultdict(list)
        self.by_content: dict[str, list[str]] = defaultdict(list)
        for p in passages:
            t, x = norm_title(p.title), norm_text(p.text)
            self.by_key[(t, x)].append(p.id)
            self.by_text[x].append(p.id)
            self.by_title[t].append(p.id)
            self.by_content[norm_text(p.content)].append(p.id)

    @property
    def n_duplicate_keys(self) -> int:
        """Passages whose normalised (title, text) repeats an earlier one."""
        return sum(len(v) - 1 for v in self.by_key.values())

    def resolve(self, title: str, text: str | None) -> tuple[list[str], str]:
        """Ids for a gold reference and how they matched ("key", "text", "title", "title_ambiguous", "none")."""
        if text is not None:
            ids = self.by_key.get((norm_title(title), norm_text(text)))
            if ids:
                return ids[:1], "key"
            ids = self.by_text.get(norm_text(text))
            if ids and len(ids) == 1:
                return ids, "text"
            return [], "none"
        ids = self.by_title.get(norm_title(title), [])
        if len(ids) > 1:
            return list(ids), "title_ambiguous"
        return ids, "title" if ids else "none"


TITLE_STEPS = ("title_parenthetical", "title_middle_words", "title_close_spelling")
TITLE_SIMILARITY = 0.85  # --title-similarity default: difflib ratio of the close-spelling step (docs/data.md)
CLOSE_SPELLING_LIMIT = 50_000  # corpus titles up to which TitleMatcher.elsewhere looks for close spellings
TITLE_SIMILARITY_RANGE = (0.5, 1.0)  # below 0.5 two unrelated short titles match; 1.0 = the step never fires
_TRAILING_PAREN = re.compile(r"\s*\([^()]*\)$")
_WORD = re.compile(r"[^\s,]+")


def _base_title(key: str) -> str:
    """A normalised title without its trailing disambiguation: "inherent vice (film)" -> "inherent vice"."""
    return _TRAILING_PAREN.sub("", key)


class TitleMatcher:
    """Loose matching of a title-only gold reference that no corpus title equals (``match_titles``; docs/data.md).

    HippoRAG's reduced 2Wiki questions name their gold passages by evidence subjects, which are Wikidata labels,
    while the corpus titles are Wikipedia page titles ("Inherent Vice" vs "Inherent Vice (film)", "Lisbet Palme" vs
    "Lisbeth Palme"). Three steps, in order, each accepting only a single corpus title:

    1. ``title_parenthetical``: the titles equal once a trailing " (...)" is dropped from either;
    2. ``title_middle_words``: the corpus title's words are the reference's first and last word with some of the
       words between ("Edsel Bryant Ford" -> "Edsel Ford");
    3. ``title_close_spelling``: the one title of highest ``difflib`` ratio, at least ``threshold``.

    A title that is already gold for the same question is never taken (its references name distinct entities:
    "Archduke Ferdinand Karl of Austria-Este" is not the question's "Archduke Ferdinand Karl Joseph of
    Austria-Este"), nor a close spelling whose best ratio a title already gold for the question shares. Where a
    step finds several titles, the one the question's text names, else the one whose passage
    contains another entity of the question's evidence (``hints``), is taken if it is the only such title; otherwise
    the reference stays missing (a wrong gold passage would count a retrieved non-gold passage as a hit). A step
    that found several titles ends the search: a later, looser step would only pick among look-alikes. A reference
    part of whose name (two or more of its words in a row) is itself a corpus title is never matched loosely: that
    page may be its entity ("Empress Dowager Từ Dụ" is not "Empress Dowager Du" while a "Từ Dụ" page exists).

    :meth:`elsewhere` tells an unmapped reference's cause apart: a corpus page that may be its entity under another
    title ("Godomar" and "Godomar II"), or none (not in the corpus)."""

    def __init__(self, index: CorpusIndex, passages: list[Passage], threshold: float = TITLE_SIMILARITY):
        lo, hi = TITLE_SIMILARITY_RANGE
        if not lo <= threshold <= hi:
            raise DataError(f"title similarity must be within [{lo}, {hi}], got {threshold}")
        self.threshold = threshold
        self.index = index
        self.display: dict[str, str] = {}  # normalised title -> the corpus's spelling
        self.text: dict[str, str] = {}  # normalised title -> normalised texts of its passages
        self.key_of: dict[str, str] = {}  # passage id -> normalised title
        for p in passages:
            key = norm_title(p.title)
            self.key_of[p.id] = key
            self.display.setdefault(key, p.title)
            self.text[key] = self.text.get(key, "") + " " + norm_text(p.text)
        self.by_base: dict[str, list[str]] = defaultdict(list)
        self.by_ends: dict[tuple[str, str], list[str]] = defaultdict(list)
        for key in self.display:
            self.by_base[_base_title(key)].append(key)
            words = _WORD.findall(key)
            if len(words) >= 2:
                self.by_ends[(words[0], words[-1])].append(key)
        self.titles = list(self.display)
        self.sorted_titles = sorted(self.display)

    def _name_parts(self, key: str) -> list[str]:
        """The corpus titles that are a proper part of ``key``'s name: two or more of its words in a row."""
        words = _WORD.findall(key)
        spans = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 2, len(words) + 1)
                 if j - i < len(words)}
        return sorted(t for t in spans if t in self.display and t != key)

    def elsewhere(self, title: str) -> str | None:
        """A corpus title the entity of an unmapped reference may be under (its title with a suffix, "Godomar" ->
        "Godomar II"; a part of its name; what any loose step finds, one title or several), else None: the
        reference's page is not in the corpus. Close spellings are looked up only in corpora of at most
        :data:`CLOSE_SPELLING_LIMIT` titles (difflib over every title per reference)."""
        key = norm_title(title)
        base = _base_title(key)
        at = bisect.bisect_left(self.sorted_titles, base + " ")
        if at < len(self.sorted_titles) and self.sorted_titles[at].startswith(base + " "):
            return self.display[self.sorted_titles[at]]
        for found in ([k for k in self.by_base.get(base, []) if k != key], self._name_parts(key)):
            if found:
                return self.display[found[0]]
        words = _WORD.findall(key)
        if len(words) >= 3:
            inner = [k for k in self.by_ends.get((words[0], words[-1]), []) if _is_subsequence(_WORD.findall(k), words)]
            if inner:
                return self.display[inner[0]]
        if len(self.titles) <= CLOSE_SPELLING_LIMIT:
            close = difflib.get_close_matches(key, self.titles, n=1, cutoff=self.threshold)
            if close:
                return self.display[close[0]]
        return None

    def _single(self, keys: list[str], question: str, hints: list[str]) -> tuple[str | None, str | None]:
        """(the one title of ``keys`` or None, what chose it among several: "question", "evidence" or None)."""
        if len(keys) == 1:
            return keys[0], None
        named = [k for k in keys if k in question]
        if len(named) == 1:
            return named[0], "question"
        norm_hints = [h for h in (norm_text(x) for x in hints) if len(h) >= 3]
        fits = [k for k in keys if any(h in self.text[k] for h in norm_hints)]
        return (fits[0], "evidence") if len(fits) == 1 else (None, None)

    def match(self, title: str, question: str = "", hints: list[str] | None = None,
              gold: list[str] | None = None) -> tuple[list[str], str, dict[str, Any] | None]:
        """(passage ids, how, the mapping for prepare_stats.json) of a reference of a question (its text, the other
        entities of its evidence, the passage ids already gold for it); ([], "none" or "title_loose_ambiguous",
        None) when no step finds a single title."""
        taken = {self.key_of[g] for g in gold or () if g in self.key_of}
        question, hints = norm_text(question), hints or []
        key = norm_title(title)
        if self._name_parts(key):  # a page named by part of its name may be its entity: no loose guess
            return [], "title_loose_ambiguous", None
        base = _base_title(key)
        words = _WORD.findall(key)
        steps: list[tuple[str, list[str], dict[str, float]]] = [
            ("title_parenthetical", [k for k in self.by_base.get(base, []) if k != key], {})]
        if len(words) >= 3:
            inner = [k for k in self.by_ends.get((words[0], words[-1]), [])
                     if k != key and _is_subsequence(_WORD.findall(k), words)]
            steps.append(("title_middle_words", inner, {}))
        scores = {k: difflib.SequenceMatcher(None, key, k).ratio()
                  for k in difflib.get_close_matches(key, self.titles, n=5, cutoff=self.threshold)}
        best = max(scores.values(), default=0.0)
        steps.append(("title_close_spelling", [k for k, r in scores.items() if r == best], scores))
        for how, keys, ratios in steps:
            if how == "title_close_spelling" and taken.intersection(keys):
                # spelt as close to a title already gold for the question: a variant of that name, or a look-alike
                return [], "title_loose_ambiguous", None
            keys = [k for k in keys if k not in taken]
            if not keys:
                continue
            found, chosen_by = self._single(keys, question, hints)
            if found is None:
                return [], "title_loose_ambiguous", None
            mapping: dict[str, Any] = {"reference": title, "title": self.display[found], "how": how}
            if how == "title_close_spelling":
                mapping["ratio"] = round(ratios[found], 3)
            if chosen_by:
                mapping["chosen_by"] = f"{chosen_by}, among {len(keys)}"
            return list(self.index.by_title[found]), how, mapping
        return [], "none", None


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    """``short`` is ``long`` with some words left out (order kept), and shorter."""
    if len(short) < 2 or len(short) >= len(long):
        return False
    it = iter(long)
    return all(w in it for w in short)


# --------------------------------------------------------------------------- shared conversion

@dataclass
class _Item:
    """One parsed question: its context paragraphs and gold references (title, text or None)."""

    ref: str
    id: str
    question: str
    answers: list[str]
    type: str
    paragraphs: list[tuple[str, str]]
    gold: list[tuple[str, str | None]]
    answerable: bool = True  # MuSiQue-Full's ``answerable``
    hints: list[str] = field(default_factory=list)  # other entities of the question (TitleMatcher's tie-break)


@dataclass
class Converted:
    """Result of a converter: canonical passages and questions plus counted warnings."""

    passages: list[Passage]
    questions: list[Question]
    stats: dict[str, Any] = field(default_factory=dict)


def _answers(ref: str, *parts: Any) -> list[str]:
    """The distinct non-empty answers of ``parts`` (an answer or a list of them), as :func:`answer_text` reads them
    (a number as written, a dict/list/bool alias a DataError naming ``ref``)."""
    out: list[str] = []
    for part in parts:
        for a in part if isinstance(part, list) else [part]:
            a = answer_text(a, ref).strip() if a is not None else ""
            if a and a not in out:
                out.append(a)
    return out


class _NFC:
    """NFC (the form of published datasets) of the texts prepare writes, counting by kind the strings it changed:
    BM25 splits a word in another form around its combining marks ("Jime\u0301nez" -> "jime", "nez")."""

    KINDS = ("passage_titles", "passage_texts", "questions", "answers")

    def __init__(self) -> None:
        self.changed: Counter[str] = Counter({k: 0 for k in self.KINDS})

    def __call__(self, s: str, kind: str | None = None) -> str:
        """``s`` in NFC; counted under ``kind`` when it changes (None: not counted)."""
        if unicodedata.is_normalized("NFC", s):
            return s
        if kind is not None:
            self.changed[kind] += 1
        return unicodedata.normalize("NFC", s)

    def item(self, it: _Item) -> None:
        """``it``'s question, answers (counted) and gold references (not counted) in NFC, in place; its paragraphs
        are normalised (and counted) as passages of the union corpus."""
        it.question = self(it.question, "questions")
        it.answers = list(dict.fromkeys(self(a, "answers") for a in it.answers))
        it.gold = [(self(t), None if x is None else self(x)) for t, x in it.gold]

    def passage(self, p: Passage) -> Passage:
        return Passage(id=p.id, title=self(p.title, "passage_titles"), text=self(p.text, "passage_texts"))


def _union_corpus(items: list[_Item], nfc: _NFC) -> tuple[list[Passage], int]:
    """The questions' paragraphs de-duplicated by (title, text) in NFC; a passage is counted by ``nfc`` as first
    seen."""
    seen: dict[tuple[str, str], str] = {}
    out: list[Passage] = []
    dup = 0
    for it in items:
        for title, text in it.paragraphs:
            raw = (title.strip(), text.strip())
            k = (nfc(raw[0]), nfc(raw[1]))
            if k in seen:
                dup += 1
                continue
            seen[k] = str(len(out))
            out.append(nfc.passage(Passage(id=seen[k], title=raw[0], text=raw[1])))
    return out, dup


UNANSWERABLE_SUFFIX = "__unanswerable"  # a kept unanswerable twin's id: its question's id + this


def _unanswerable(items: list[_Item], keep: bool) -> tuple[list[_Item], dict[str, int]]:
    """MuSiQue-Full's ``answerable: false`` records: dropped, or (``keep``) kept without answers and gold, so that
    EM/F1 and recall skip them as the official evaluate_v1.0.py:58-60 does (qa=true refuses such a folder); a
    kept twin with the id of an answerable record gets ``<id>__unanswerable`` (counted)."""
    n = sum(1 for it in items if not it.answerable)
    if n == len(items) and not keep:
        raise DataError(f"{items[0].ref}: all {n} records are answerable: false (MuSiQue-Full's unanswerable "
                        "questions); --keep-unanswerable keeps them")
    if not keep:
        return [it for it in items if it.answerable], {"unanswerable_in_file": n, "unanswerable_dropped": n}
    answerable_ids = {it.id for it in items if it.answerable}
    renamed = 0
    for it in items:
        if not it.answerable:
            it.answers, it.gold = [], []
            if it.id in answerable_ids:  # MuSiQue-Full's twin shares its question's id: kept under its own
                it.id += UNANSWERABLE_SUFFIX
                renamed += 1
    return items, {"unanswerable_in_file": n, "unanswerable_dropped": 0, "unanswerable_renamed": renamed}


def _check_ids(items: list[_Item]) -> None:
    seen: dict[str, _Item] = {}
    for it in items:
        first = seen.setdefault(it.id, it)
        if first is not it:
            raise DataError(f"{it.ref}: duplicate question id '{it.id}' (first at {first.ref})")


def _finish(items: list[_Item], corpus_path: str | Path | None, dataset: str, fmt: str,
            limit: int | None, needs_corpus: bool = False, keep_unanswerable: bool = False,
            match_titles: bool = False, title_similarity: float = TITLE_SIMILARITY) -> Converted:
    """Build the corpus (file or union), resolve gold references, check ids, count everything; ``match_titles``
    matches title-only references no corpus title equals with :class:`TitleMatcher`."""
    if not items:
        raise DataError(f"{fmt}: no questions in the input")
    n_in = len(items)
    items, unanswerable = _unanswerable(items, keep_unanswerable)
    _check_ids(items)
    if limit is not None and limit > 0:
        items = items[:limit]
    stats: dict[str, Any] = {"format": fmt, "dataset": dataset, "questions_in_file": n_in, **unanswerable,
                             "unanswerable_kept": sum(1 for it in items if not it.answerable)}
    nfc = _NFC()
    for it in items:
        nfc.item(it)
    if corpus_path is not None:
        passages = [nfc.passage(p) for p in load_hipporag_corpus(corpus_path)]
        stats["corpus_source"] = "file"
    elif needs_corpus:
        raise DataError(f"format '{fmt}' needs --corpus (its questions carry no passage texts)")
    else:
        passages, dup = _union_corpus(items, nfc)
        stats["corpus_source"] = "union of question paragraphs"
        stats["paragraphs_deduplicated"] = dup
    if not passages:
        raise DataError(f"{fmt}: empty corpus (no passages)")
    stats["nfc_normalised"] = dict(nfc.changed)
    index = CorpusIndex(passages)
    stats["corpus_duplicate_title_text"] = index.n_duplicate_keys
    if not match_titles and title_similarity != TITLE_SIMILARITY:
        raise DataError(f"a title similarity ({title_similarity}) has no effect without title matching "
                        "(--match-titles)")
    matcher = TitleMatcher(index, passages, title_similarity) if match_titles else None
    loose: list[dict[str, Any]] = []
    unmapped: list[dict[str, Any]] = []  # every gold reference kept as missing, with its cause
    classifier = matcher
    how: Counter[str] = Counter()
    types: Counter[str] = Counter()
    q_all = q_some = q_none = q_nogold = 0
    examples: list[dict[str, str]] = []
    questions: list[Question] = []
    for it in items:
        gold: list[str] = []
        found = 0
        resolved = [index.resolve(title, text) for title, text in it.gold]
        exact = [g for ids, _ in resolved for g in ids]  # loose matching never lands on these (TitleMatcher)
        for (title, text), (ids, kind) in zip(it.gold, resolved, strict=True):
            if matcher is not None and not ids and text is None:
                ids, kind, mapping = matcher.match(title, it.question, [h for h in it.hints if h != title],
                                                   exact + gold)
                if mapping is not None:
                    loose.append({"question": it.id, **mapping})
            how[kind] += 1
            if ids:
                found += 1
            else:
                ids = [MISSING_PREFIX + title]
                if text is None and classifier is None:
                    classifier = TitleMatcher(index, passages)
                under = classifier.elsewhere(title) if text is None and classifier is not None else None
                unmapped.append({"question": it.id, "title": title,
                                 "cause": "other_title" if under else "not_in_corpus",
                                 **({"corpus_title": under} if under else {})})
                if len(examples) < _N_EXAMPLES:
                    examples.append({"question": it.id, "title": title, "where": it.ref})
                log.debug("%s: gold passage '%s' not in corpus", it.ref, title)
            gold += [g for g in ids if g not in gold]
        if not it.gold:
            q_nogold += 1
        elif found == len(it.gold):
            q_all += 1
        elif found:
            q_some += 1
        else:
            q_none += 1
        types[it.type] += 1
        questions.append(Question(id=it.id, question=it.question, answers=it.answers, gold_ids=gold,
                                  type=it.type, dataset=dataset))
    n_missing = how["none"] + how["title_loose_ambiguous"]
    n_gold_questions = len(questions) - q_nogold
    stats.update({
        "questions": len(questions), "passages": len(passages),
        "gold_refs": sum(how.values()), "gold_found": sum(how.values()) - n_missing, "gold_not_found": n_missing,
        "gold_matched_by": dict(sorted(how.items())),
        "questions_all_gold_found": q_all, "questions_some_gold_missing": q_some,
        "questions_no_gold_found": q_none, "questions_without_gold": q_nogold,
        "questions_without_answers": sum(1 for q in questions if not q.answers),
        "types": dict(sorted(types.items())), "gold_not_found_examples": examples,
        # why each unmapped reference is: a page under another title (a title mismatch the matching could fix, or
        # refused), or no page at all (not in the corpus): the report names the two apart
        "gold_not_found_causes": dict(Counter(u["cause"] for u in unmapped)), "gold_not_found_refs": unmapped,
        # the recall ceiling: a question with a gold reference kept as missing can never reach recall 1
        "gold_ceiling": {"questions_fully_mapped": q_all, "questions_with_gold": n_gold_questions,
                         "share": round(q_all / n_gold_questions, 4) if n_gold_questions else None},
        "title_matching": {"enabled": matcher is not None,
                           "similarity": title_similarity if matcher is not None else None,
                           "matched": {k: how[k] for k in TITLE_STEPS if how[k]},
                           "ambiguous": how["title_loose_ambiguous"], "mappings": loose},
    })
    if n_missing:
        log.warning("%s: %d gold references not found in the corpus (%d questions affected); kept as '%s<title>' "
                    "so they count as misses", fmt, n_missing, q_some + q_none, MISSING_PREFIX)
    if how["title_ambiguous"]:
        log.warning("%s: %d gold titles match several corpus passages; all are gold", fmt, how["title_ambiguous"])
    if q_nogold:
        log.warning("%s: %d questions have no gold passages", fmt, q_nogold)
    if stats["unanswerable_dropped"]:
        log.warning("%s: dropped %d unanswerable questions (answerable: false); --keep-unanswerable keeps them", fmt,
                    stats["unanswerable_dropped"])
    return Converted(passages, questions, stats)


def _qid(rec: dict, ref: str) -> str:
    return str(_get(rec, ref, "id", "_id", "question_id", typ=(str, int)))


def _qtype(rec: dict, qid: str) -> str:
    return str(rec.get("type") or rec.get("question_type") or musique_hop_type(qid))


# --------------------------------------------------------------------------- per-format parsers

def _parse_paragraph_record(ref: str, rec: dict, para_key: str = "paragraphs") -> _Item:
    """MuSiQue / HippoRAG-MuSiQue record: paragraphs [{title, paragraph_text|text, is_supporting}]."""
    qid = _qid(rec, ref)
    paras = _get(rec, ref, para_key, typ=list)
    ctx, gold = [], []
    for j, p in enumerate(paras):
        if not isinstance(p, dict):
            raise DataError(f"{ref}: {para_key}[{j}] should be an object")
        title = _title(p.get("title"), f"{ref} {para_key}[{j}]")
        text = _get(p, f"{ref} {para_key}[{j}]", "paragraph_text", "text")
        ctx.append((title, text))
        if _flag(p, f"{ref} {para_key}[{j}]", "is_supporting"):
            gold.append((title, text))
    answers = _answers(ref, rec.get("answer"), _string_list(rec.get("answer_aliases"), ref, "answer_aliases"))
    return _Item(ref, qid, _question_text(rec, ref), answers, _qtype(rec, qid), ctx, gold)


def _supporting_text(ref: str, sf: list, paragraphs: list[tuple[int, str]]) -> str | None:
    """The text of the paragraph a supporting fact ``[title, sentence_index]`` points to: the one paragraph with that
    title, or (a title twice in one context) the first that has the sentence, with a warning; None when absent."""
    if len(paragraphs) > 1:
        i = sf[1] if len(sf) > 1 and isinstance(sf[1], int) else -1
        fits = [text for n, text in paragraphs if 0 <= i < n] or [paragraphs[0][1]]
        log.warning("%s: %d context paragraphs share the supporting title %r; the gold one is the first with "
                    "sentence %s", ref, len(paragraphs), sf[0], i)
        return fits[0]
    return paragraphs[0][1] if paragraphs else None


def _parse_context_record(ref: str, rec: dict) -> _Item:
    """HotpotQA / 2Wiki native record: context [[title, [sentences]]], supporting_facts [[title, i]]."""
    qid = _qid(rec, ref)
    context = _get(rec, ref, "context", typ=list)
    ctx: list[tuple[str, str]] = []
    sentences: dict[str, list[tuple[int, str]]] = {}  # title -> (sentence count, text) of its paragraphs
    for j, c in enumerate(context):
        if not (isinstance(c, list) and len(c) == 2 and isinstance(c[1], list)):
            raise DataError(f"{ref}: context[{j}] should be [title, [sentences]]")
        bad = next((i for i, x in enumerate(c[1]) if not isinstance(x, str)), None)
        if bad is not None:  # a null sentence was joined into the passage as the word "None"
            raise DataError(f"{ref}: context[{j}] sentence {bad} should be a string, got {type(c[1][bad]).__name__} "
                            f"({json.dumps(c[1][bad])[:60]})")
        title = _title(c[0], f"{ref} context[{j}]")
        ctx.append((title, join_sentences(c[1])))
        sentences.setdefault(title, []).append((len(c[1]), ctx[-1][1]))
    gold: list[tuple[str, str | None]] = []
    for j, sf in enumerate(_get(rec, ref, "supporting_facts", typ=list)):
        if not (isinstance(sf, list) and sf and isinstance(sf[0], str)):
            raise DataError(f"{ref}: supporting_facts[{j}] should be [title, sentence_index]")
        g = (sf[0], _supporting_text(ref, sf, sentences.get(sf[0], [])))
        if g not in gold:
            gold.append(g)
    answers = _answers(ref, rec.get("answer"), _string_list(rec.get("answer_aliases"), ref, "answer_aliases"))
    return _Item(ref, qid, _question_text(rec, ref), answers, _qtype(rec, qid), ctx, gold)


def _parse_evidence_record(ref: str, rec: dict) -> _Item:
    """HippoRAG's reduced 2Wiki record: gold = distinct evidence subjects, matched on title."""
    qid = _qid(rec, ref)
    gold: list[tuple[str, str | None]] = []
    hints: list[str] = []
    for j, ev in enumerate(_get(rec, ref, "evidence", "evidences", typ=list)):
        if not (isinstance(ev, list) and len(ev) == 3 and isinstance(ev[0], str)):
            raise DataError(f"{ref}: evidence[{j}] should be [subject, relation, object]")
        if (ev[0], None) not in gold:
            gold.append((ev[0], None))
        hints += [x for x in (ev[0], ev[2]) if isinstance(x, str) and x not in hints]
    answers = _answers(ref, rec.get("answer"), _string_list(rec.get("answer_aliases"), ref, "answer_aliases"))
    return _Item(ref, qid, _question_text(rec, ref), answers, _qtype(rec, qid), [], gold, hints=hints)


def _parse_ircot_record(ref: str, rec: dict) -> _Item:
    """IRCoT processed record: question_text, answers_objects[{spans}], contexts[{title, paragraph_text, ...}]."""
    qid = _qid(rec, ref)
    spans: list[Any] = []
    for j, ao in enumerate(_get(rec, ref, "answers_objects", typ=list)):
        if not isinstance(ao, dict):
            raise DataError(f"{ref}: answers_objects[{j}] should be an object")
        spans += _string_list(ao.get("spans"), f"{ref} answers_objects[{j}]", "spans")
    item = _parse_paragraph_record(ref, {**rec, "id": qid, "question": _question_text(rec, ref, "question_text"),
                                         "answer": spans, "answer_aliases": []}, para_key="contexts")
    return item


def _parse_hipporag_record(ref: str, rec: dict) -> _Item:
    """HippoRAG questions: MuSiQue-like (paragraphs), HotpotQA/2Wiki-like (supporting_facts) or 2Wiki evidence."""
    if "paragraphs" in rec:
        return _parse_paragraph_record(ref, rec)
    if "supporting_facts" in rec and "context" in rec:
        return _parse_context_record(ref, rec)
    if "evidence" in rec:
        return _parse_evidence_record(ref, rec)
    raise DataError(f"{ref}: HippoRAG question has none of 'paragraphs', 'supporting_facts'+'context', 'evidence'")


DATASETS = ("musique", "hotpotqa", "2wikimultihopqa")  # what --dataset names; prepare_stats.json's "dataset"
_FORMAT_OF = {"musique": "musique", "hotpotqa": "hotpotqa", "2wikimultihopqa": "2wiki"}  # each one's native --format
_TWOWIKI_TYPES = {"compositional", "bridge_comparison", "inference"}  # 2Wiki's types that HotpotQA lacks
_NAMES = {"musique": "MuSiQue", "hotpotqa": "HotpotQA", "2wikimultihopqa": "2WikiMultihopQA"}


def dataset_from_path(path: str | Path) -> str | None:
    """Dataset name from a file path (HippoRAG "<name>.json", IRCoT "processed_data/<name>/..."), else None."""
    p = Path(path)
    for part in (p.stem.lower(), p.parent.name.lower()):
        for name in DATASETS:
            if part.startswith(name):
                return name
    return None


def _source_dataset(fmt: str, fixed: str | None, given: str | None, questions: str | Path) -> tuple[str, str]:
    """(dataset, what named it) for a conversion: the format's own dataset, else ``--dataset``, else the file name;
    a DataError when ``--dataset`` contradicts the format or nothing names one (never the format's name)."""
    if given is not None and given not in DATASETS:
        raise DataError(f"--dataset must be one of {', '.join(DATASETS)}, got '{given}'")
    if fixed is not None:
        if given is not None and given != fixed:
            raise DataError(f"--format {fmt} reads {fixed} data, not {given}: for {given} data use --format "
                            f"{_FORMAT_OF[given]} (or --format hipporag/ircot with --dataset {given})")
        return fixed, "format"
    from_name = dataset_from_path(questions)
    if given is not None:
        if from_name is not None and from_name != given:
            log.warning("%s: the file name says %s but --dataset is %s; the folder is recorded as %s", questions,
                        from_name, given, given)
        return given, "--dataset"
    if from_name is None:
        raise DataError(f"{questions}: --format {fmt} cannot tell which dataset this file holds (its name is not "
                        f"HippoRAG's <dataset>.json nor under IRCoT's processed_data/<dataset>/): give --dataset "
                        f"{{{','.join(DATASETS)}}}")
    return from_name, "file name"


def _foreign_source(rec: dict) -> tuple[str, str] | None:
    """(dataset, the field that says so) when a record carries a field only HotpotQA or only 2Wiki has: ``level``
    (HotpotQA), ``evidences`` or a 2Wiki-only type (compositional, bridge_comparison, inference)."""
    if "level" in rec:
        return "hotpotqa", "field 'level'"
    if "evidences" in rec:
        return "2wikimultihopqa", "field 'evidences'"
    kind = rec.get("type") or rec.get("question_type")
    if isinstance(kind, str) and kind in _TWOWIKI_TYPES:
        return "2wikimultihopqa", f"type '{kind}'"
    return None


def _check_source(ref: str, rec: dict, dataset: str, fmt: str, named_by: str) -> None:
    """DataError naming the record and the option to change when its fields belong to another dataset than the one
    the folder will be recorded as (2Wiki data under --format hotpotqa would be tabled and scored as HotpotQA)."""
    found = _foreign_source(rec)
    if found is None or found[0] == dataset:
        return
    other, why = found
    if named_by == "format":
        raise DataError(f"{ref}: a {_NAMES[other]} record ({why}) under --format {fmt}, which is "
                        f"{_NAMES[dataset]}'s: use --format {_FORMAT_OF[other]}")
    raise DataError(f"{ref}: a {_NAMES[other]} record ({why}) but the folder would be recorded as {dataset} (from "
                    f"the {named_by}): use --dataset {other}")


ALIAS_FILE = "id_aliases.json"  # 2WikiMultihopQA's alias file (README, data_ids release)


def load_id_aliases(path: str | Path) -> dict[str, list[str]]:
    """2Wiki's ``id_aliases.json`` (one JSON object a line: ``Q_id``, ``aliases``, ``demonyms``) as
    {Q_id: aliases + demonyms}, as 2wikimultihop_evaluate_v1.1.py:171-182 reads it. A string ``aliases`` or
    ``demonyms`` is one alias (never its letters: "NYC" is not the answers "N", "Y", "C")."""
    out: dict[str, list[str]] = {}
    for ref, rec in read_records(path, "alias"):
        qid = _get(rec, ref, "Q_id")
        out[qid] = _answers(ref, _string_list(rec.get("aliases"), ref, "aliases"),
                            _string_list(rec.get("demonyms"), ref, "demonyms"))
    return out


def _with_id_aliases(ref: str, rec: dict, aliases: dict[str, list[str]]) -> dict:
    """A record whose ``answer_id`` has aliases gets them after its ``answer_aliases`` (the gold answers of
    2wikimultihop_evaluate_v1.1.py:197-200: the answer plus aliases and demonyms of its Wikidata id); a string
    ``answer_aliases`` is one alias, as without the alias file (never its characters)."""
    extra = aliases.get(str(rec.get("answer_id"))) if rec.get("answer_id") is not None else None
    if not extra:
        return rec
    return {**rec, "answer_aliases": [*_string_list(rec.get("answer_aliases"), ref, "answer_aliases"), *extra]}


def _convert(parse: Callable[[str, dict], _Item], fmt: str, fixed: str | None, needs_corpus: bool = False):
    def convert(questions: str | Path, corpus: str | Path | None = None, limit: int | None = None,
                alias_file: str | Path | None = None, dataset: str | None = None,
                keep_unanswerable: bool = False, match_titles: bool = False,
                title_similarity: float = TITLE_SIMILARITY) -> Converted:
        """``alias_file``: 2Wiki's id_aliases.json (default: that file beside ``questions``, if present);
        ``dataset``: the source dataset (``--dataset``; needed when neither the format nor the file name says);
        ``keep_unanswerable``: keep ``answerable: false`` records (without answers and gold) instead of dropping them;
        ``match_titles``: match title-only gold references loosely (:class:`TitleMatcher`, ``title_similarity`` its
        close-spelling threshold)."""
        name, named_by = _source_dataset(fmt, fixed, dataset, questions)
        found = Path(alias_file) if alias_file is not None else Path(questions).parent / ALIAS_FILE
        aliases = load_id_aliases(found) if alias_file is not None or found.is_file() else {}
        items = []
        for ref, rec in read_records(questions):
            _check_source(ref, rec, name, fmt, named_by)
            items.append(parse(ref, _with_id_aliases(ref, rec, aliases)))
            items[-1].answerable = _flag(rec, ref, "answerable", default=True)
        conv = _finish(items, corpus, name, fmt, limit, needs_corpus=needs_corpus,
                       keep_unanswerable=keep_unanswerable, match_titles=match_titles,
                       title_similarity=title_similarity)
        conv.stats["dataset_from"] = named_by
        conv.stats["questions_file"] = str(questions)
        conv.stats["corpus_file"] = str(corpus) if corpus is not None else None
        conv.stats["alias_file"] = str(found) if aliases else None
        return conv

    convert.__name__ = f"convert_{fmt}"
    convert.__doc__ = f"Convert {fmt} questions (+ optional corpus file) to canonical records."
    return convert


convert_musique = _convert(_parse_paragraph_record, "musique", "musique")
convert_hotpotqa = _convert(_parse_context_record, "hotpotqa", "hotpotqa")
convert_2wiki = _convert(_parse_context_record, "2wiki", "2wikimultihopqa")
convert_2wiki_hipporag = _convert(_parse_evidence_record, "2wiki_hipporag", "2wikimultihopqa", needs_corpus=True)
convert_hipporag = _convert(_parse_hipporag_record, "hipporag", None, needs_corpus=True)
convert_ircot = _convert(_parse_ircot_record, "ircot", None)

FORMATS: dict[str, Callable[..., Converted]] = {
    "musique": convert_musique,
    "hotpotqa": convert_hotpotqa,
    "2wiki": convert_2wiki,
    "2wiki_hipporag": convert_2wiki_hipporag,
    "hipporag": convert_hipporag,
    "ircot": convert_ircot,
}


def get_converter(fmt: str) -> Callable[..., Converted]:
    """The converter for a format name; unknown names raise DataError listing the known ones."""
    try:
        return FORMATS[fmt]
    except KeyError:
        raise DataError(f"unknown dataset format '{fmt}' (known: {', '.join(FORMATS)})") from None
