"""What data a run is on, recognised by content (DESIGN.md "Outputs": a paper's number stands beside ours only on
the paper table's setting, "recognised by content, never by name; a random subset of the paper's questions is
labelled n of N").

- :func:`corpus_identity`: the passage count and a sha256 over the sorted, NFC-normalised (title, text) pairs, so
  that the same passages under other ids, in another order or read from another file format hash alike, and one
  changed passage does not.
- :func:`questions_identity`: the question count, a sha256 over the sorted question ids and one over the sorted
  (id, question text) pairs.
- :func:`recognise`: the known data set (gear_repro/resources/known_datasets.yaml) these identities are. The corpus
  matches by content hash where the registry has one and by exact count where it has only the paper's count,
  saying which. The questions match only by their ids (and texts, where the registry has them): the same set, or
  "n of N" when every id is one of the set's listed ids. A count never matches a question set: 25 relabelled
  questions over a corpus of a paper's passage count are not "25 of the paper's 1,000".

Both identities are computed from what :class:`gear_repro.data.dataset.Dataset` holds in memory (its ``passages``
and ``questions``): a pass over the texts and one sort, 2.3 s for 430,225 synthetic 60-word passages (the size of
IRCoT's 2Wiki corpus) on a 2-core machine.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gear_repro.types import Passage, Question
from gear_repro.utils.errors import DataError

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
KNOWN_DATASETS = RESOURCES / "known_datasets.yaml"
KNOWN_IDS = RESOURCES / "known_question_ids"  # <name>.txt: the ids of a known question set, one a line

# How a corpus / question set matched a registry entry, strongest first (:attr:`KnownData.score`).
CORPUS_MATCHES = ("content", "count")
QUESTION_MATCHES = ("ids", "ids_subset", "count", "count_subset", "none")
# "count" / "count_subset" are what runs recorded before a count stopped matching a question set; recognise no
# longer gives them, and the report reads them as unchecked questions (reporting/setting.py)
MATCHED_QUESTIONS = ("ids", "ids_subset")


def _nfc(s: str) -> str:
    return s if unicodedata.is_normalized("NFC", s) else unicodedata.normalize("NFC", s)


def passage_key(title: str, text: str) -> str:
    """One passage's hashed form: its NFC, trimmed (title, text) as a JSON list (unambiguous: no separator a text
    could contain)."""
    return json.dumps([_nfc(title).strip(), _nfc(text).strip()], ensure_ascii=False)


def corpus_identity(passages: Iterable[Passage]) -> dict[str, Any]:
    """``{"passages": n, "content_sha256": hex}`` of a corpus. The hash is over the sorted (title, text) pairs,
    NFC-normalised and trimmed (the forms gear-repro-prepare writes), one a line: independent of passage ids, file
    format and order; repeated passages count (the corpus is a multiset, as its size is)."""
    keys = sorted(passage_key(p.title, p.text) for p in passages)
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode("utf-8"))
        h.update(b"\n")
    return {"passages": len(keys), "content_sha256": h.hexdigest()}


def _ids_sha256(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


TEXT_HASH_CHARS = 16  # of a question text's sha256 in known_question_ids/<name>.txt: 64 bits tell texts apart


def question_text_sha(text: str) -> str:
    """A question text's short hash: its NFC, trimmed form (what gear-repro-prepare writes)."""
    return hashlib.sha256(_nfc(str(text)).strip().encode("utf-8")).hexdigest()[:TEXT_HASH_CHARS]


def _texts_sha256(texts: dict[str, str]) -> str:
    return hashlib.sha256("\n".join(f"{i}\t{texts[i]}" for i in sorted(texts)).encode("utf-8")).hexdigest()


def questions_identity(questions: Sequence[Question], split: str | None = None) -> dict[str, Any]:
    """``{"questions": n, "ids_sha256": hex, "texts_sha256": hex, "split": split, "ids": [sorted ids], "texts":
    {id: text hash}}`` of a question set. ``ids_sha256`` is over the sorted ids joined by newlines, ``texts_sha256``
    over the sorted (id, :func:`question_text_sha`) pairs (both independent of order and file). ``split`` is what
    the caller knows of it (None: unknown; :func:`recognise` names the split of the known set it matches); ``ids``
    and ``texts`` let :func:`recognise` check a subset, and each question's text, against a known set whose ids the
    registry lists (run.json keeps the hashes only)."""
    ids = sorted(str(q.id) for q in questions)
    if len(set(ids)) != len(ids):
        dup = next(a for a, b in zip(ids, ids[1:], strict=False) if a == b)
        raise DataError(f"question id '{dup}' appears twice: a question set's identity needs unique ids")
    texts = {str(q.id): question_text_sha(q.question) for q in questions}
    return {"questions": len(ids), "ids_sha256": _ids_sha256(ids), "texts_sha256": _texts_sha256(texts),
            "split": split, "ids": ids, "texts": texts}


def dataset_identity(dataset: Any) -> dict[str, dict[str, Any]]:
    """Both identities of a loaded :class:`~gear_repro.data.dataset.Dataset` (its questions as the run keeps them,
    i.e. after ``dataset.limit``)."""
    return {"corpus": corpus_identity(dataset.passages), "questions": questions_identity(dataset.questions)}


# --------------------------------------------------------------------------- the registry

@dataclass(frozen=True)
class KnownSet:
    """One entry of known_datasets.yaml (see that file for the fields' meaning)."""

    name: str
    dataset: str
    source: str
    split: str
    questions: int
    passages: int
    corpus_sha256: str | None = None
    ids_sha256: str | None = None
    ids: frozenset[str] | None = None  # from known_question_ids/<name>.txt
    texts: dict[str, str] | None = None  # id -> question_text_sha, from the same file where it lists them
    texts_sha256: str | None = None  # over the full set's (id, text hash) pairs, where its ids cannot ship
    subset_of: str | None = None
    used_by: tuple[str, ...] = ()
    citation: str = ""
    note: str = ""


@dataclass(frozen=True)
class KnownData:
    """What :func:`recognise` found: the known set, how the corpus and the questions matched, and n of N.

    ``corpus_matched_by``: "content" (hash equal) or "count" (the registry has the paper's count only).
    ``questions_matched_by``: "ids" (the same ids, and texts where the registry has them), "ids_subset" (a subset
    of the listed ids, or of a registered subset of this set) or "none" (the corpus is known, the questions are not
    a set the registry knows, or the registry cannot check them: a count is no match). ``why_not``: why the
    questions are "none" ("the registry has no ids of its 500 questions", "12 of the ids ask other questions").
    ``matched``: the names of every entry whose corpus and questions both matched (the best and its
    alternatives), the sets a paper table's ``known_datasets`` are checked against.
    ``questions_of``: N, the size of the question set the run's questions come from (the known set's, or for a
    sample registered as ``subset_of`` another, that set's). ``alternatives``: other entries that match too (e.g.
    HippoRAG 2's 2Wiki corpus, known only by its count, beside HippoRAG's hashed one)."""

    name: str
    dataset: str
    source: str
    split: str
    passages: int
    corpus_matched_by: str
    questions: int
    questions_matched_by: str
    questions_of: int
    subset_of: str | None = None
    used_by: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    citation: str = ""
    note: str = ""
    why_not: str = ""
    matched: tuple[str, ...] = ()

    @property
    def is_subset(self) -> bool:
        """The run's questions are part of a known set, and fewer than the set they come from."""
        return self.questions_matched_by != "none" and self.questions < self.questions_of

    @property
    def score(self) -> tuple[int, int]:
        """Strength of the match (higher is stronger): content over count, ids over counts."""
        return (len(CORPUS_MATCHES) - CORPUS_MATCHES.index(self.corpus_matched_by),
                len(QUESTION_MATCHES) - QUESTION_MATCHES.index(self.questions_matched_by))

    @property
    def label(self) -> str:
        """E.g. "HippoRAG 2Wiki (6,119 passages, by content; 300 of 1,000 questions, by ids)"."""
        how = {"ids": "by ids", "ids_subset": "by ids", "count": "by count only", "count_subset": "by count only",
               "none": "not a known question set"}[self.questions_matched_by]
        qs = (f"{self.questions:,} questions" if not self.is_subset
              else f"{self.questions:,} of {self.questions_of:,} questions")
        return f"{self.source} ({self.passages:,} passages, by {self.corpus_matched_by}; {qs}, {how})"


def _read_ids(name: str) -> tuple[frozenset[str], dict[str, str] | None] | None:
    """The ids of known_question_ids/<name>.txt (one a line, "<id>\t<question_text_sha>" where the file has the
    texts' hashes: every line or none), or None without the file."""
    path = KNOWN_IDS / f"{name}.txt"
    if not path.is_file():
        return None
    rows = [line.strip().split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    with_text = {len(r) for r in rows}
    if with_text - {1, 2} or len(with_text) > 1:
        raise DataError(f"{path}: each line should be an id, or an id and its text hash, the same for every line")
    ids = frozenset(r[0] for r in rows)
    return ids, ({r[0]: r[1] for r in rows} if with_text == {2} else None)


def write_known_ids(name: str, questions_id: dict[str, Any], folder: Path = KNOWN_IDS) -> Path:
    """Write known_question_ids/<name>.txt from a :func:`questions_identity`: its sorted ids with their texts'
    hashes (scripts/known_dataset_ids.py --write-ids)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.txt"
    texts = questions_id["texts"]
    path.write_text("".join(f"{i}\t{texts[i]}\n" for i in questions_id["ids"]), encoding="utf-8")
    return path


@lru_cache(maxsize=4)
def known_sets(path: Path = KNOWN_DATASETS) -> tuple[KnownSet, ...]:
    """The registry, checked: unique names, counts as positive integers, a listed ids file of the stated size and
    hash, ``subset_of`` naming an entry with more questions."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = raw.get("datasets") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise DataError(f"{path}: expected a mapping with a 'datasets' list")
    out: list[KnownSet] = []
    for i, e in enumerate(entries):
        label = e.get("name") if isinstance(e, dict) else repr(e)
        ref = f"{path.name}: datasets[{i}] ({label})"
        if not isinstance(e, dict):
            raise DataError(f"{ref}: expected a mapping")
        for key in ("name", "dataset", "source", "split", "questions", "passages"):
            if e.get(key) in (None, ""):
                raise DataError(f"{ref}: lacks '{key}'")
        for key in ("questions", "passages"):
            if not isinstance(e[key], int) or isinstance(e[key], bool) or e[key] <= 0:
                raise DataError(f"{ref}: '{key}' should be a positive integer, got {e[key]!r}")
        listed = _read_ids(e["name"])
        ids, texts = listed if listed is not None else (None, None)
        if ids is not None:
            if len(ids) != e["questions"]:
                raise DataError(f"{KNOWN_IDS / (e['name'] + '.txt')}: {len(ids)} ids, but {ref} says "
                                f"{e['questions']} questions")
            if e.get("ids_sha256") and _ids_sha256(ids) != e["ids_sha256"]:
                raise DataError(f"{KNOWN_IDS / (e['name'] + '.txt')}: its ids do not hash to {ref}'s ids_sha256")
        out.append(KnownSet(name=e["name"], dataset=e["dataset"], source=e["source"], split=str(e["split"]),
                            questions=e["questions"], passages=e["passages"],
                            corpus_sha256=e.get("corpus_sha256") or None, ids_sha256=e.get("ids_sha256") or None,
                            ids=ids, texts=texts, texts_sha256=e.get("texts_sha256") or None,
                            subset_of=e.get("subset_of") or None, used_by=tuple(e.get("used_by") or ()),
                            citation=str(e.get("citation") or ""), note=str(e.get("note") or "")))
    names = [k.name for k in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise DataError(f"{path.name}: the name '{dup}' is registered twice")
    by_name = {k.name: k for k in out}
    for k in out:
        if k.subset_of and (k.subset_of not in by_name or by_name[k.subset_of].questions <= k.questions):
            raise DataError(f"{path.name}: {k.name}.subset_of '{k.subset_of}' is no registered set with more "
                            "questions")
    return tuple(out)


def _corpus_match(k: KnownSet, corpus_id: dict[str, Any]) -> str | None:
    if k.corpus_sha256:  # a hash decides: the same count with other passages is other data
        return "content" if corpus_id.get("content_sha256") == k.corpus_sha256 else None
    return "count" if corpus_id.get("passages") == k.passages else None


def _questions_match(k: KnownSet, questions_id: dict[str, Any] | None) -> tuple[str, str]:
    """("ids" / "ids_subset" / "none", why "none") of a question set against one registry entry: by its ids
    (listed, or their hash), and the questions' texts where the registry has them. A count never matches."""
    if not questions_id:
        return "none", "the run records no question identity"
    ids = questions_id.get("ids")
    texts = questions_id.get("texts")
    if k.ids is not None and ids is not None:
        mine = set(ids)
        if not mine <= k.ids:
            outside = len(mine - k.ids)
            return "none", f"{outside:,} of its {len(mine):,} question ids are not {k.name}'s"
        if k.texts is not None and texts is not None:
            other = sum(texts.get(i) != k.texts[i] for i in mine)
            if other:
                return "none", f"{other:,} of its {len(mine):,} questions ask other questions under {k.name}'s ids"
        return ("ids" if mine == k.ids else "ids_subset"), ""
    if k.ids_sha256 and questions_id.get("ids_sha256") == k.ids_sha256:
        if k.texts_sha256 and questions_id.get("texts_sha256") and questions_id["texts_sha256"] != k.texts_sha256:
            return "none", f"its questions ask other questions under {k.name}'s ids"
        return "ids", ""
    if k.ids_sha256:  # a subset of a set known by its hash only cannot be checked
        return "none", f"its ids are not {k.name}'s (the registry has their hash only, so no subset is checked)"
    return "none", f"the registry has no ids of the {k.questions:,} questions of {k.name}: a count is no match"


def owners(questions_id: dict[str, Any] | None, registry: Sequence[KnownSet] | None = None) -> frozenset[str]:
    """The registry entries these questions are by their ids (the same ids, or a subset of the listed ones; texts
    checked where listed), with the sets those are registered subsets of: the question sets these questions are
    part of, whatever corpus they are run over."""
    sets = tuple(registry) if registry is not None else known_sets()
    by_name = {k.name: k for k in sets}
    own = {k.name for k in sets if _questions_match(k, questions_id)[0] in MATCHED_QUESTIONS}
    parents = set()
    for name in own:
        while by_name[name].subset_of:
            name = by_name[name].subset_of
            parents.add(name)
    return frozenset(own | parents)


def recognise(corpus_id: dict[str, Any], questions_id: dict[str, Any] | None = None,
              registry: Sequence[KnownSet] | None = None) -> KnownData | None:
    """The known data set a corpus (and question set) is, or None when the corpus is none the registry knows.

    A registry entry with a content hash matches only a corpus with that hash; one without matches a corpus with
    exactly its passage count. The questions then match by ids only (:func:`_questions_match`; an entry whose ids
    the registry lacks matches the questions of a registered subset of it, :func:`owners`), else "none". Of
    several matching entries the strongest match is returned (:attr:`KnownData.score`; ties: registry order), the
    others named in ``alternatives``, those whose questions matched too in ``matched``."""
    sets = tuple(registry) if registry is not None else known_sets()
    by_name = {k.name: k for k in sets}
    owned = owners(questions_id, sets)
    found: list[KnownData] = []
    for k in sets:
        cm = _corpus_match(k, corpus_id)
        if cm is None:
            continue
        qm, why = _questions_match(k, questions_id)
        if qm == "none" and k.name in owned:  # a registered subset of it matched by ids
            qm, why = "ids_subset", ""
        n = int(questions_id["questions"]) if questions_id else k.questions
        of = by_name[k.subset_of].questions if k.subset_of else k.questions
        found.append(KnownData(name=k.name, dataset=k.dataset, source=k.source, split=k.split,
                               passages=k.passages, corpus_matched_by=cm, questions=n, questions_matched_by=qm,
                               questions_of=of, subset_of=k.subset_of, used_by=k.used_by, citation=k.citation,
                               note=k.note, why_not=why))
    if not found:
        return None
    order = sorted(range(len(found)), key=lambda i: (found[i].score, -i), reverse=True)
    best = found[order[0]]
    others = tuple(found[i].name for i in order[1:])
    matched = tuple(found[i].name for i in order if found[i].questions_matched_by in MATCHED_QUESTIONS)
    why = best.why_not
    if not matched:  # the reason of an entry whose ids the registry lists says more than "no ids"
        checked = [f.why_not for f in found if by_name[f.name].ids is not None or by_name[f.name].ids_sha256]
        why = checked[0] if checked else why
    return KnownData(**{**best.__dict__, "alternatives": others, "matched": matched, "why_not": why})


__all__ = ["MATCHED_QUESTIONS", "KnownData", "KnownSet", "corpus_identity", "dataset_identity", "known_sets",
           "owners", "passage_key", "question_text_sha", "questions_identity", "recognise", "write_known_ids"]
