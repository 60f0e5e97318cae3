"""Read and write the canonical JSONL files, validating every record.

corpus.jsonl    {id, title, text}
questions.jsonl {id, question, answers: [...], gold_ids: [...], type, dataset}
triples.jsonl   {id, subject, predicate, object, passage_id}
"""

from __future__ import annotations

import gc
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import Any

from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import iter_jsonl, json_kind, record_bar, write_jsonl

log = logging.getLogger(__name__)


def _need(rec: dict, key: str, typ: type | tuple, where: str):
    if key not in rec:
        raise DataError(f"{where}: record lacks field '{key}'")
    val = rec[key]
    # a JSON true/false is no id, text or number here (Python's bool is an int: True would become "True")
    if not isinstance(val, typ) or isinstance(val, bool):
        raise DataError(f"{where}: field '{key}' should be {typ}, got {type(val).__name__}")
    return val


def _id(rec: dict, key: str, where: str) -> str:
    """A record's id (string or integer) as text; an empty one is a DataError (it names nothing)."""
    val = str(_need(rec, key, (str, int), where))
    if not val.strip():
        raise DataError(f"{where}: field '{key}' is empty (an id must name the record)")
    return val


def _optional_text(rec: dict, key: str, where: str) -> str:
    """An optional text field (``title``, ``type``, ``dataset``): a string, or absent/null = ""; a list or object
    is a DataError (indexed or grouped as its Python text, "['Paris', 'France']", it would pass unnoticed)."""
    val = rec.get(key)
    if val is None:
        return ""
    if not isinstance(val, str):
        raise DataError(f"{where}: field '{key}' should be a string, got {json_kind(val)} "
                        f"({json.dumps(val, default=str)[:60]})")
    return val


def passage_record(rec: dict, where: str) -> Passage:
    """One corpus.jsonl record as a Passage, validated (the loader's and gear-repro-prepare's one check)."""
    return Passage(id=_id(rec, "id", where), title=_optional_text(rec, "title", where),
                   text=_need(rec, "text", str, where))


def question_record(rec: dict, where: str) -> Question:
    """One questions.jsonl record as a Question, validated (the loader's and gear-repro-prepare's one check)."""
    qid = _id(rec, "id", where)
    answers = _need(rec, "answers", list, where)
    gold = _need(rec, "gold_ids", list, where)
    for key, vals, kinds in (("gold_ids", gold, (str, int)), ("answers", answers, (str, int, float))):
        if any(v is None or (isinstance(v, str) and not v.strip()) for v in vals):  # never scored as "None"
            raise DataError(f"{where}: question '{qid}' has a null or empty entry in '{key}'")
        # an id as 6.0 would never equal the corpus's "6"; an answer as {"text": ...} or a list would be scored
        # as its Python text: strings (ids also ints, answers also numbers) only
        bad = next((v for v in vals if isinstance(v, bool) or not isinstance(v, kinds)), None)
        if bad is not None:
            raise DataError(f"{where}: question '{qid}': an entry of '{key}' is {json_kind(bad)} "
                            f"({json.dumps(bad)[:60]}); expected {'ids as strings or integers' if key == 'gold_ids' else 'answer strings'}")
    text = _need(rec, "question", str, where)
    if not text.strip():
        raise DataError(f"{where}: question '{qid}' has an empty question text")
    return Question(id=qid, question=text,
                    answers=[answer_text(a, f"{where}: question '{qid}'") for a in answers],
                    gold_ids=[str(g) for g in gold], type=_optional_text(rec, "type", where),
                    dataset=_optional_text(rec, "dataset", where))


def triple_record(rec: dict, where: str) -> Triple:
    """One triples.jsonl record as a Triple, validated (the loader's and gear-repro-prepare's one check)."""
    tid = _id(rec, "id", where)
    vals = []
    for key in ("subject", "predicate", "object"):
        if key not in rec:
            raise DataError(f"{where}: record lacks field '{key}'")
        val = rec[key]
        # a NaN, a number or an empty part would be a graph entity named "nan", "1977" or "" (every empty
        # subject one node): the triple says nothing a reader can use
        if not isinstance(val, str) or not val.strip():
            kind = "an empty string" if isinstance(val, str) else json_kind(val)
            raise DataError(f"{where}: field '{key}' should be a non-empty string, got {kind} "
                            f"({json.dumps(val, default=str)[:60]})")
        vals.append(val)
    return Triple(tid, *vals, passage_id=_id(rec, "passage_id", where))


def unique_records(rows: Iterable[tuple[str, str, dict]], build: Callable[[dict, str], Any], kind: str) -> list:
    """Records built and checked one by one, each id once: the one check of files and in-memory data (a duplicate
    is a DataError naming both places). ``rows`` gives (where, short place, record): ``("f.jsonl:3", "line 3",
    {...})`` for a file, ``("passages[2]", "passages[2]", {...})`` for a Python list or a DataFrame row."""
    out: list = []
    seen: dict[str, str] = {}
    # The records hold no reference cycles, so the cyclic collector has nothing to free here, yet its full passes
    # over every object made so far grow with the file: MuSiQue size's 1.5M triples load in 33 s with it, 19 s
    # without (one machine, one after the other).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for where, place, rec in rows:
            item = build(rec, where)
            if item.id in seen:
                raise DataError(f"{where}: duplicate {kind} id '{item.id}' (first at {seen[item.id]})")
            seen[item.id] = place
            out.append(item)
    finally:
        if collecting:
            gc.enable()
    return out


def _file_rows(path: Path) -> Iterator[tuple[str, str, dict]]:
    for lineno, rec in iter_jsonl(path):
        yield f"{path}:{lineno}", f"line {lineno}", rec


def load_corpus(path: str | Path) -> list[Passage]:
    path = Path(path)
    out = unique_records(_file_rows(path), passage_record, "passage")
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
    out = unique_records(_file_rows(path), question_record, "question")
    if not out:
        raise DataError(f"{path}: no questions")
    return out


def load_triples(path: str | Path) -> list[Triple]:
    return unique_records(_file_rows(Path(path)), triple_record, "triple")


def _count(items: Iterable[Any]) -> int:
    """How many ``items`` there are where that is known without consuming them (a bar's total), else 0."""
    return len(items) if isinstance(items, Sized) else 0


def check_records(passages: Sequence[Passage], questions: Sequence[Question], triples: Sequence[Triple] | None,
                  source: str) -> None:
    """The loader's record checks on converted data before it is written (gear-repro-prepare): a folder prepare
    writes always loads, and what a hand-made folder may not hold, prepare may not write. ``source`` names the
    input in messages."""
    with record_bar(len(passages) + len(questions) + len(triples or ()), "checking records") as bar:
        for p in passages:
            passage_record({"id": p.id, "title": p.title, "text": p.text}, f"{source}: passage '{p.id}'")
            bar.update()
        for q in questions:
            question_record(q.to_dict(), f"{source}: question '{q.id}'")
            bar.update()
        for t in triples or ():
            triple_record({"id": t.id, "subject": t.subject, "predicate": t.predicate, "object": t.object,
                           "passage_id": t.passage_id}, f"{source}: triple '{t.id}'")
            bar.update()


def save_corpus(path: str | Path, passages: Iterable[Passage]) -> int:
    return write_jsonl(path, ({"id": p.id, "title": p.title, "text": p.text} for p in passages), _count(passages))


def save_questions(path: str | Path, questions: Iterable[Question]) -> int:
    return write_jsonl(path, (q.to_dict() for q in questions), _count(questions))


def save_triples(path: str | Path, triples: Iterable[Triple]) -> int:
    return write_jsonl(path, (
        {"id": t.id, "subject": t.subject, "predicate": t.predicate, "object": t.object, "passage_id": t.passage_id}
        for t in triples
    ), _count(triples))
