"""Read and write the canonical JSONL files, validating every record.

corpus.jsonl    {id, title, text}
questions.jsonl {id, question, answers: [...], gold_ids: [...], type, dataset}
triples.jsonl   {id, subject, predicate, object, passage_id}
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import iter_jsonl, json_kind, write_jsonl

log = logging.getLogger(__name__)


def _need(rec: dict, key: str, typ: type | tuple, path: Path, lineno: int):
    if key not in rec:
        raise DataError(f"{path}:{lineno}: record lacks field '{key}'")
    val = rec[key]
    if not isinstance(val, typ):
        raise DataError(f"{path}:{lineno}: field '{key}' should be {typ}, got {type(val).__name__}")
    return val


def load_corpus(path: str | Path) -> list[Passage]:
    path = Path(path)
    out: list[Passage] = []
    seen: dict[str, int] = {}
    for lineno, rec in iter_jsonl(path):
        pid = str(_need(rec, "id", (str, int), path, lineno))
        if pid in seen:
            raise DataError(f"{path}:{lineno}: duplicate passage id '{pid}' (first at line {seen[pid]})")
        seen[pid] = lineno
        title = rec.get("title") or ""
        text = _need(rec, "text", str, path, lineno)
        out.append(Passage(id=pid, title=str(title), text=text))
    if not out:
        raise DataError(f"{path}: empty corpus (no passages)")
    return out


def answer_text(value: Any, ref: str) -> str:
    """An answer as the text the official scripts compare: a string as given, a number as a person writes it (35.0 ->
    "35": a JSON writer that made an integer column float would otherwise score "35" as wrong); a bool, object,
    list or non-finite number is a DataError naming ``ref`` (scored as its Python text, it could never match)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{ref}: an answer is {json_kind(value)} ({json.dumps(value, default=str)[:60]}); expected "
                        "answer strings (or numbers)")
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def load_questions(path: str | Path) -> list[Question]:
    path = Path(path)
    out: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, rec in iter_jsonl(path):
        qid = str(_need(rec, "id", (str, int), path, lineno))
        if qid in seen:
            raise DataError(f"{path}:{lineno}: duplicate question id '{qid}' (first at line {seen[qid]})")
        seen[qid] = lineno
        answers = _need(rec, "answers", list, path, lineno)
        gold = _need(rec, "gold_ids", list, path, lineno)
        for key, vals, kinds in (("gold_ids", gold, (str, int)), ("answers", answers, (str, int, float))):
            if any(v is None or (isinstance(v, str) and not v.strip()) for v in vals):  # never scored as "None"
                raise DataError(f"{path}:{lineno}: question '{qid}' has a null or empty entry in '{key}'")
            # an id as 6.0 would never equal the corpus's "6"; an answer as {"text": ...} or a list would be scored
            # as its Python text: strings (ids also ints, answers also numbers) only
            bad = next((v for v in vals if isinstance(v, bool) or not isinstance(v, kinds)), None)
            if bad is not None:
                raise DataError(f"{path}:{lineno}: question '{qid}': an entry of '{key}' is {json_kind(bad)} "
                                f"({json.dumps(bad)[:60]}); expected {'ids as strings or integers' if key == 'gold_ids' else 'answer strings'}")
        text = _need(rec, "question", str, path, lineno)
        if not text.strip():
            raise DataError(f"{path}:{lineno}: question '{qid}' has an empty question text")
        out.append(Question(
            id=qid,
            question=text,
            answers=[answer_text(a, f"{path}:{lineno}: question '{qid}'") for a in answers],
            gold_ids=[str(g) for g in gold],
            type=str(rec.get("type") or ""),
            dataset=str(rec.get("dataset") or ""),
        ))
    if not out:
        raise DataError(f"{path}: no questions")
    return out


def load_triples(path: str | Path) -> list[Triple]:
    path = Path(path)
    out: list[Triple] = []
    seen: set[str] = set()
    for lineno, rec in iter_jsonl(path):
        tid = str(_need(rec, "id", (str, int), path, lineno))
        if tid in seen:
            raise DataError(f"{path}:{lineno}: duplicate triple id '{tid}'")
        seen.add(tid)
        vals = [str(_need(rec, k, (str, int, float), path, lineno)) for k in ("subject", "predicate", "object")]
        out.append(Triple(tid, *vals, passage_id=str(_need(rec, "passage_id", (str, int), path, lineno))))
    return out


def save_corpus(path: str | Path, passages: Iterable[Passage]) -> int:
    return write_jsonl(path, ({"id": p.id, "title": p.title, "text": p.text} for p in passages))


def save_questions(path: str | Path, questions: Iterable[Question]) -> int:
    return write_jsonl(path, (q.to_dict() for q in questions))


def save_triples(path: str | Path, triples: Iterable[Triple]) -> int:
    return write_jsonl(path, (
        {"id": t.id, "subject": t.subject, "predicate": t.predicate, "object": t.object, "passage_id": t.passage_id}
        for t in triples
    ))
