"""What data a run is on, recognised by content (DESIGN.md "Outputs": a paper's number stands beside ours only on
the paper table's setting, "recognised by content, never by name; a random subset of the paper's questions is
labelled n of N").

- :func:`corpus_identity`: the passage count and a sha256 over the sorted, NFC-normalised (title, text) pairs, so
  that the same passages under other ids, in another order or read from another file format hash alike, and one
  changed passage does not.
- :func:`questions_identity`: the question count and a sha256 over the sorted question ids.
- :func:`recognise`: the known data set (gear_repro/resources/known_datasets.yaml) these identities are, matched by
  content hash where the registry has one and by exact counts where it has only the paper's counts, saying which;
  a question set smaller than a known one is "n of N" (by ids where the registry lists them, else by count).

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


def _nfc(s: str) -> str:
    return s if unicodedata.is_normalized("NFC", s) else unicodedata.normalize("NFC", s)


def _pair_key(title: str, text: str) -> str:
    """One passage's hashed form: its NFC, trimmed (title, text) as a JSON list (unambiguous: no separator a text
    could contain)."""
    return json.dumps([_nfc(title).strip(), _nfc(text).strip()], ensure_ascii=False)


def corpus_identity(passages: Iterable[Passage]) -> dict[str, Any]:
    """``{"passages": n, "content_sha256": hex}`` of a corpus. The hash is over the sorted (title, text) pairs,
    NFC-normalised and trimmed (the forms gear-repro-prepare writes), one a line: independent of passage ids, file
    format and order; repeated passages count (the corpus is a multiset, as its size is)."""
    keys = sorted(_pair_key(p.title, p.text) for p in passages)
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode("utf-8"))
        h.update(b"\n")
    return {"passages": len(keys), "content_sha256": h.hexdigest()}


def _ids_sha256(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


def questions_identity(questions: Sequence[Question], split: str | None = None) -> dict[str, Any]:
    """``{"questions": n, "ids_sha256": hex, "split": split, "ids": [sorted ids]}`` of a question set. The hash is
    over the sorted ids joined by newlines (independent of order and file). ``split`` is what the caller knows of
    it (None: unknown; :func:`recognise` names the split of the known set it matches); ``ids`` lets
    :func:`recognise` check a subset against a known set whose ids the registry lists."""
    ids = sorted(str(q.id) for q in questions)
    if len(set(ids)) != len(ids):
        dup = next(a for a, b in zip(ids, ids[1:], strict=False) if a == b)
        raise DataError(f"question id '{dup}' appears twice: a question set's identity needs unique ids")
    return {"questions": len(ids), "ids_sha256": _ids_sha256(ids), "split": split, "ids": ids}


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
    subset_of: str | None = None
    used_by: tuple[str, ...] = ()
    citation: str = ""
    note: str = ""


@dataclass(frozen=True)
class KnownData:
    """What :func:`recognise` found: the known set, how the corpus and the questions matched, and n of N.

    ``corpus_matched_by``: "content" (hash equal) or "count" (the registry has the paper's count only).
    ``questions_matched_by``: "ids" (the same ids), "ids_subset" (a subset of the listed ids), "count" (the same
    count; ids unknown), "count_subset" (fewer questions than the known set; ids unknown: n of N by count only) or
    "none" (the corpus is known, the questions are not a set the registry knows).
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
        how = {"ids": "by ids", "ids_subset": "by ids", "count": "by count", "count_subset": "by count only",
               "none": "not a known question set"}[self.questions_matched_by]
        qs = (f"{self.questions:,} questions" if not self.is_subset
              else f"{self.questions:,} of {self.questions_of:,} questions")
        return f"{self.source} ({self.passages:,} passages, by {self.corpus_matched_by}; {qs}, {how})"


def _read_ids(name: str) -> frozenset[str] | None:
    path = KNOWN_IDS / f"{name}.txt"
    if not path.is_file():
        return None
    return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


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
        ids = _read_ids(e["name"])
        if ids is not None:
            if len(ids) != e["questions"]:
                raise DataError(f"{KNOWN_IDS / (e['name'] + '.txt')}: {len(ids)} ids, but {ref} says "
                                f"{e['questions']} questions")
            if e.get("ids_sha256") and _ids_sha256(ids) != e["ids_sha256"]:
                raise DataError(f"{KNOWN_IDS / (e['name'] + '.txt')}: its ids do not hash to {ref}'s ids_sha256")
        out.append(KnownSet(name=e["name"], dataset=e["dataset"], source=e["source"], split=str(e["split"]),
                            questions=e["questions"], passages=e["passages"],
                            corpus_sha256=e.get("corpus_sha256") or None, ids_sha256=e.get("ids_sha256") or None,
                            ids=ids, subset_of=e.get("subset_of") or None, used_by=tuple(e.get("used_by") or ()),
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


def _questions_match(k: KnownSet, questions_id: dict[str, Any] | None) -> str:
    if not questions_id:
        return "none"
    n = questions_id.get("questions")
    ids = questions_id.get("ids")
    if k.ids_sha256 and questions_id.get("ids_sha256") == k.ids_sha256:
        return "ids"
    if k.ids is not None and ids is not None:
        if set(ids) == k.ids:
            return "ids"
        return "ids_subset" if set(ids) < k.ids else "none"
    if k.ids_sha256:  # the ids are known only by their hash: a different set of the same size is not this one
        return "count_subset" if isinstance(n, int) and 0 < n < k.questions else "none"
    if n == k.questions:
        return "count"
    return "count_subset" if isinstance(n, int) and 0 < n < k.questions else "none"


def owners(questions_id: dict[str, Any] | None, registry: Sequence[KnownSet] | None = None) -> frozenset[str]:
    """The registry entries these questions are known to be by their ids (the same ids, or a subset of the listed
    ones), with the sets those are registered subsets of. Such questions match no other entry by count: the
    bundled MuSiQue train sample over a generated 148,793-passage corpus is not "100 of GEAR's 500 test
    questions"."""
    sets = tuple(registry) if registry is not None else known_sets()
    by_name = {k.name: k for k in sets}
    own = {k.name for k in sets if _questions_match(k, questions_id) in ("ids", "ids_subset")}
    return frozenset(own | {by_name[n].subset_of for n in own if by_name[n].subset_of})


def recognise(corpus_id: dict[str, Any], questions_id: dict[str, Any] | None = None,
              registry: Sequence[KnownSet] | None = None) -> KnownData | None:
    """The known data set a corpus (and question set) is, or None when the corpus is none the registry knows.

    A registry entry with a content hash matches only a corpus with that hash; one without matches a corpus with
    exactly its passage count. The questions then match by ids (the same set, or a subset of the ids the registry
    lists), else by count (the same count, or fewer: "n of N" by count only; not when the ids are another
    entry's, :func:`owners`), else "none". Of several matching
    entries the strongest match is returned (:attr:`KnownData.score`; ties: registry order), the others named in
    ``alternatives``."""
    sets = tuple(registry) if registry is not None else known_sets()
    by_name = {k.name: k for k in sets}
    owned = owners(questions_id, sets)
    found: list[KnownData] = []
    for k in sets:
        cm = _corpus_match(k, corpus_id)
        if cm is None:
            continue
        qm = _questions_match(k, questions_id)
        if owned and k.name not in owned and qm in ("count", "count_subset"):  # known to be other questions
            qm = "none"
        n = int(questions_id["questions"]) if questions_id else k.questions
        of = by_name[k.subset_of].questions if k.subset_of else k.questions
        found.append(KnownData(name=k.name, dataset=k.dataset, source=k.source, split=k.split,
                               passages=k.passages, corpus_matched_by=cm, questions=n, questions_matched_by=qm,
                               questions_of=of, subset_of=k.subset_of, used_by=k.used_by, citation=k.citation,
                               note=k.note))
    if not found:
        return None
    order = sorted(range(len(found)), key=lambda i: (found[i].score, -i), reverse=True)
    best = found[order[0]]
    others = tuple(found[i].name for i in order[1:])
    return KnownData(**{**best.__dict__, "alternatives": others})


__all__ = ["KnownData", "KnownSet", "corpus_identity", "dataset_identity", "known_sets", "questions_identity",
           "recognise"]
