"""Passages, questions and triples from Python: lists of dicts or pandas DataFrames (the API's data from memory).

Each record goes through the file loaders' own checks (:mod:`gear_repro.data.canonical`: fields and types, ids
once; :func:`gear_repro.data.dataset.check_links`: gold ids and triples pointing into the corpus), with errors
naming the record (``questions[4]``). The content hashes are those of the canonical files the same records make
(:func:`write_dataset` writes them byte for byte), so caches, fingerprints and the report's recognition of a known
data set work as for a folder.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gear_repro.data.canonical import (
    passage_record,
    question_record,
    save_corpus,
    save_questions,
    save_triples,
    triple_record,
    unique_records,
)
from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import check_text

Records = Any  # a list (or iterable) of dicts, or a pandas DataFrame with one row per record

__all__ = ["Records", "content_hash", "passage_dicts", "passages_from", "question_dicts", "questions_from",
           "triple_dicts", "triples_from", "write_dataset"]


def _clean(value: Any) -> Any:
    """A DataFrame cell as the JSON value a file would hold: a missing scalar (NaN, None, pd.NA) is absent (None),
    numpy scalars and arrays become Python values."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value


def _rows(data: Records, what: str) -> Iterator[tuple[str, str, dict]]:
    """(where, place, record) of each record of ``data``, named ``what[i]`` (a DataFrame row by its position)."""
    if data is None:
        return
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        data = data.to_dict("records")
    if isinstance(data, Mapping | str | bytes):
        raise DataError(f"{what}: expected a list of records (dicts) or a DataFrame, got {type(data).__name__}")
    for i, rec in enumerate(data):
        where = f"{what}[{i}]"
        if not isinstance(rec, Mapping):
            raise DataError(f"{where}: a record must be a dict (a DataFrame row), got {type(rec).__name__}")
        clean = {str(k): _clean(v) for k, v in rec.items() if _clean(v) is not None}
        check_text(clean, where)  # a lone surrogate: no UTF-8 text, the folder written from it would fail
        yield where, where, clean


def passages_from(data: Records, what: str = "passages") -> list[Passage]:
    """Passages ``{id, title, text}``; a DataError naming the record for a missing field or a duplicate id."""
    out = unique_records(_rows(data, what), passage_record, "passage")
    if not out:
        raise DataError(f"{what}: empty corpus (no passages)")
    return out


def questions_from(data: Records, what: str = "questions") -> list[Question]:
    """Questions ``{id, question, answers, gold_ids, type, dataset}``; ``answers`` and ``gold_ids`` may be left out
    (a question to answer, not to score: empty lists)."""
    def build(rec: dict, where: str) -> Question:
        return question_record({"answers": [], "gold_ids": [], **rec}, where)

    return unique_records(_rows(data, what), build, "question")


def triples_from(data: Records, what: str = "triples") -> list[Triple]:
    """Triples ``{id, subject, predicate, object, passage_id}`` (``check_links`` checks the passage ids)."""
    return unique_records(_rows(data, what), triple_record, "triple")


def passage_dicts(passages: Iterable[Passage]) -> Iterator[dict]:
    return ({"id": p.id, "title": p.title, "text": p.text} for p in passages)


def question_dicts(questions: Iterable[Question]) -> Iterator[dict]:
    return (q.to_dict() for q in questions)


def triple_dicts(triples: Iterable[Triple]) -> Iterator[dict]:
    return ({"id": t.id, "subject": t.subject, "predicate": t.predicate, "object": t.object,
             "passage_id": t.passage_id} for t in triples)


def content_hash(records: Iterable[dict], n: int = 16) -> str:
    """sha256 of the JSONL file ``records`` make (the line format of :func:`gear_repro.utils.io.write_jsonl`), so
    equal to :func:`gear_repro.utils.hashing.hash_file` of that file."""
    h = hashlib.sha256()
    for rec in records:
        h.update((json.dumps(rec, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
    return h.hexdigest()[:n]


WRITTEN_BY = ".written_by_api"  # marks a folder write_dataset owns: its files may be replaced by other records


def write_dataset(folder: str | Path, passages: list[Passage], questions: list[Question] | None,
                  triples: list[Triple] | None) -> Path:
    """The canonical folder of these records (corpus.jsonl, questions.jsonl, triples.jsonl), written only when its
    files are not there already with the same content (a content-addressed folder is shared by every pipeline on
    the same data). A file of the three that these records do not have (no triples given) is removed: another
    corpus's triples would be read with these passages. A DataError, before anything is written, for a folder
    gear-repro-prepare wrote or one whose files hold other records and that this function did not write (a user's
    data_dir: its corpus and questions would be overwritten)."""
    from gear_repro.utils.hashing import hash_file

    root = Path(folder)
    if (root / "prepare_stats.json").is_file():
        raise DataError(f"data_dir {root} is a folder gear-repro-prepare wrote (prepare_stats.json): the records "
                        "given would overwrite its corpus and questions; pass a new or empty data_dir, or leave "
                        f"passages= out to read it (dataset.path={root})")
    parts = [("corpus.jsonl", passage_dicts, save_corpus, passages), ("questions.jsonl", question_dicts,
             save_questions, questions), ("triples.jsonl", triple_dicts, save_triples, triples)]
    stale = [(root / name, items) for name, dicts, _, items in parts if (root / name).is_file() and (
        items is None or hash_file(root / name) != content_hash(dicts(items)))]
    if stale and not (root / WRITTEN_BY).is_file():
        raise DataError(f"data_dir {root} holds {stale[0][0].name} of other records, not written by "
                        "Pipeline.from_config: the records given would overwrite or sit beside it; pass a new or "
                        "empty data_dir")
    root.mkdir(parents=True, exist_ok=True)
    (root / WRITTEN_BY).touch()
    for path, items in stale:
        if items is None:
            path.unlink()
    for name, _, save, items in parts:
        path = root / name
        if items is not None and (not path.is_file() or path in {p for p, _ in stale}):
            save(path, items)
    return root
