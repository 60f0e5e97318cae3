"""Bad input gives errors that name the file and record, or counted warnings; nothing is dropped silently."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path

import pytest

from gear_repro.cli.prepare import main as prepare_main
from gear_repro.data import load_corpus, load_dataset, load_questions, load_triples
from gear_repro.data.converters import FORMATS, get_converter
from gear_repro.data.openie import import_hipporag_openie
from gear_repro.types import Passage
from gear_repro.utils.errors import DataError

MQ = {"id": "2hop__1_2", "question": "Q?", "answer": "A", "answer_aliases": [],
      "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "t text", "is_supporting": True}]}


def _lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- converters

def test_missing_questions_file_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"questions file not found: .*nope\.json"):
        FORMATS["musique"](tmp_path / "nope.json")


def test_missing_corpus_file_named(tmp_path: Path) -> None:
    q = _lines(tmp_path / "q.jsonl", json.dumps(MQ))
    with pytest.raises(DataError, match=r"corpus file not found: .*c\.json"):
        FORMATS["musique"](q, corpus=tmp_path / "c.json")


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    q = _lines(tmp_path / "q.jsonl", json.dumps(MQ), '{"id": "x", "question": ')
    with pytest.raises(DataError, match=r"q\.jsonl:2: malformed JSON line"):
        FORMATS["musique"](q)


def test_malformed_json_list_names_file_and_line(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text('[\n{"id": "a"},\n{"id": }\n]', encoding="utf-8")
    with pytest.raises(DataError, match=r"q\.json: invalid JSON at line 3"):
        FORMATS["hotpotqa"](q)


def test_record_missing_field_names_record(tmp_path: Path) -> None:
    bad = {k: v for k, v in MQ.items() if k != "question"}
    q = _json(tmp_path / "q.json", [MQ, {**bad, "id": "b"}])
    with pytest.raises(DataError, match=r"q\.json\[1\]: record lacks field 'question'"):
        FORMATS["musique"](q)
    q2 = _lines(tmp_path / "h.jsonl", json.dumps({"_id": "h", "question": "?", "answer": "a", "context": [["T", "x"]],
                                                   "supporting_facts": []}))
    with pytest.raises(DataError, match=r"h\.jsonl:1: context\[0\] should be \[title, \[sentences\]\]"):
        FORMATS["hotpotqa"](q2)


def test_unknown_format() -> None:
    with pytest.raises(DataError, match=r"unknown dataset format 'nq'.*musique.*ircot"):
        get_converter("nq")


def test_unknown_format_cli(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        prepare_main(["--format", "nq", "--questions", "x", "--out", "y"])
    assert e.value.code == 2 and "invalid choice: 'nq'" in capsys.readouterr().err


def test_cli_reports_data_errors(tmp_path: Path, capsys) -> None:
    rc = prepare_main(["--format", "musique", "--questions", str(tmp_path / "none.json"), "--out", str(tmp_path)])
    assert rc == 2 and "error: questions file not found" in capsys.readouterr().err


def test_gold_not_in_corpus_is_counted_and_kept_as_miss(tmp_path: Path, caplog) -> None:
    q = _json(tmp_path / "q.json", [MQ])
    corpus = _json(tmp_path / "c.json", [{"title": "Other", "text": "other text"}])
    with caplog.at_level(logging.WARNING):
        conv = FORMATS["musique"](q, corpus=corpus)
    assert conv.stats["gold_not_found"] == 1 and conv.stats["questions_no_gold_found"] == 1
    assert conv.questions[0].gold_ids == ["missing:T"]
    assert conv.stats["gold_not_found_examples"][0]["question"] == "2hop__1_2"
    assert "1 gold references not found" in caplog.text


def test_duplicate_question_ids(tmp_path: Path) -> None:
    q = _json(tmp_path / "q.json", [MQ, MQ])
    with pytest.raises(DataError, match=r"q\.json\[1\]: duplicate question id '2hop__1_2' \(first at .*q\.json\[0\]\)"):
        FORMATS["musique"](q)


def test_duplicate_corpus_ids(tmp_path: Path) -> None:
    q = _json(tmp_path / "q.json", [MQ])
    corpus = _json(tmp_path / "c.json", [{"idx": 1, "title": "T", "text": "t text"}, {"idx": 1, "title": "U", "text": "u"}])
    with pytest.raises(DataError, match=r"c\.json\[1\]: duplicate passage id '1'"):
        FORMATS["musique"](q, corpus=corpus)


def test_empty_inputs(tmp_path: Path) -> None:
    q = _json(tmp_path / "q.json", [MQ])
    with pytest.raises(DataError, match=r"c\.json: empty corpus"):
        FORMATS["musique"](q, corpus=_json(tmp_path / "c.json", []))
    with pytest.raises(DataError, match=r"empty questions file"):
        FORMATS["musique"](_lines(tmp_path / "e.jsonl"))
    with pytest.raises(DataError, match=r"no questions"):
        FORMATS["musique"](_json(tmp_path / "e.json", []))


def test_formats_without_passage_texts_need_a_corpus(tmp_path: Path) -> None:
    q = _json(tmp_path / "q.json", [{"id": "w", "question": "?", "answer": "a", "evidence": [["S", "r", "O"]]}])
    for fmt in ("2wiki_hipporag", "hipporag"):
        with pytest.raises(DataError, match=f"format '{fmt}' needs --corpus"):
            FORMATS[fmt](q, dataset="2wikimultihopqa")


def test_hipporag_record_of_unknown_shape(tmp_path: Path) -> None:
    q = _json(tmp_path / "q.json", [{"id": "z", "question": "?"}])
    c = _json(tmp_path / "c.json", [{"title": "T", "text": "t"}])
    with pytest.raises(DataError, match=r"q\.json\[0\]: HippoRAG question has none of"):
        FORMATS["hipporag"](q, corpus=c, dataset="musique")


def test_openie_file_errors(tmp_path: Path) -> None:
    ps = [Passage("0", "T", "t")]
    with pytest.raises(DataError, match="OpenIE file not found"):
        import_hipporag_openie(tmp_path / "none.json", ps)
    with pytest.raises(DataError, match=r"o\.json: expected a JSON object with a 'docs' list"):
        import_hipporag_openie(_json(tmp_path / "o.json", [{"passage": "T\nt"}]), ps)
    with pytest.raises(DataError, match=r"p\.json docs\[0\]: 'extracted_triples' should be a list"):
        import_hipporag_openie(_json(tmp_path / "p.json", {"docs": [{"passage": "T\nt", "extracted_triples": "x"}]}), ps)


# --------------------------------------------------------------------------- canonical loaders

def test_canonical_missing_and_malformed(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"file not found: .*corpus\.jsonl"):
        load_corpus(tmp_path / "corpus.jsonl")
    c = _lines(tmp_path / "corpus.jsonl", '{"id": "0", "title": "T", "text": "t"}', "{oops")
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: malformed JSON line"):
        load_corpus(c)
    c = _lines(tmp_path / "c2.jsonl", '{"id": "0", "title": "T", "text": "t"}', '[1, 2]')
    with pytest.raises(DataError, match=r"c2\.jsonl:2: expected a JSON object"):
        load_corpus(c)


def test_canonical_duplicates_and_fields(tmp_path: Path) -> None:
    c = _lines(tmp_path / "corpus.jsonl", '{"id": "0", "text": "a"}', "", '{"id": "0", "text": "b"}')
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: duplicate passage id '0' \(first at line 1\)"):
        load_corpus(c)
    q = _lines(tmp_path / "q.jsonl", '{"id": "q", "question": "?", "answers": ["a"], "gold_ids": []}',
               '{"id": "q", "question": "?", "answers": ["a"], "gold_ids": []}')
    with pytest.raises(DataError, match=r"q\.jsonl:2: duplicate question id 'q'"):
        load_questions(q)
    q = _lines(tmp_path / "q2.jsonl", '{"id": "q", "question": "?", "answers": "a", "gold_ids": []}')
    with pytest.raises(DataError, match=r"q2\.jsonl:1: field 'answers' should be"):
        load_questions(q)
    q = _lines(tmp_path / "q3.jsonl", '{"id": "q", "question": "?", "answers": []}')
    with pytest.raises(DataError, match=r"q3\.jsonl:1: record lacks field 'gold_ids'"):
        load_questions(q)
    t = _lines(tmp_path / "t.jsonl", '{"id": "t", "subject": "s", "predicate": "p", "object": "o", "passage_id": "0"}',
               '{"id": "t", "subject": "s", "predicate": "p", "object": "o", "passage_id": "0"}')
    with pytest.raises(DataError, match=r"t\.jsonl:2: duplicate triple id 't'"):
        load_triples(t)
    # the loader pauses the cyclic collector while it builds the records, and hands it back after an error too
    assert gc.isenabled()
    gc.disable()
    try:
        assert len(load_triples(_lines(tmp_path / "t2.jsonl", t.read_text().splitlines()[0]))) == 1
        assert not gc.isenabled()  # a caller's choice is left as it was
    finally:
        gc.enable()


def test_canonical_empty(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"empty corpus"):
        load_corpus(_lines(tmp_path / "corpus.jsonl"))
    with pytest.raises(DataError, match=r"no questions"):
        load_questions(_lines(tmp_path / "questions.jsonl", ""))


# --------------------------------------------------------------------------- dataset folder

def test_dataset_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset folder not found: .*nowhere.*gear-repro-prepare"):
        load_dataset(tmp_path / "nowhere")
    # dataset=2wiki_sample before `make samples` (the README's route): says so
    with pytest.raises(DataError, match=r"data/prepared/2wiki_sample \(`make samples` prepares"):
        load_dataset(tmp_path / "data" / "prepared" / "2wiki_sample")


def test_dataset_gold_not_in_corpus_counted(toy_dir: Path, caplog) -> None:
    _lines(toy_dir / "questions.jsonl",
           '{"id": "a", "question": "?", "answers": ["x"], "gold_ids": ["0", "missing:Z"]}',
           '{"id": "b", "question": "?", "answers": ["x"], "gold_ids": []}')
    with caplog.at_level(logging.WARNING):
        ds = load_dataset(toy_dir)
    assert ds.warnings == {"gold_not_in_corpus": 1, "questions_without_gold": 1}
    assert ds.questions[0].gold_ids == ["0", "missing:Z"]  # kept: counts as a miss
    assert "question 'a' gold 'missing:Z'" in caplog.text
    with pytest.raises(DataError, match=r"questions\.jsonl: 1 gold passage ids are not in corpus\.jsonl"):
        load_dataset(toy_dir, missing_gold="error")
    _lines(toy_dir / "questions.jsonl", '{"id": "a", "question": "?", "answers": ["x"], "gold_ids": ["Z1", "Z2"]}')
    with pytest.raises(DataError, match=r"none of the 2 gold passage ids is in corpus\.jsonl"):
        load_dataset(toy_dir)  # another corpus or id format: never a run of zeros


def test_a_float_written_number_answer_is_scored_as_written(toy_dir: Path) -> None:
    rec = {"id": "a", "question": "How many?", "answers": [35.0, 35, 2.5], "gold_ids": ["0"]}
    (toy_dir / "questions.jsonl").write_text(json.dumps(rec) + "\n")
    assert load_dataset(toy_dir).questions[0].answers == ["35", "35", "2.5"]  # never "35.0": "35" would score 0


@pytest.mark.parametrize("field, value, msg", [
    ("gold_ids", [6.0], r"an entry of 'gold_ids' is number \(6\.0\); expected ids"),
    ("answers", [{"text": "Paris"}], r"an entry of 'answers' is object \(\{\"text\": \"Paris\"\}\); expected answer"),
    ("answers", [["Paris", "City of Light"]], r"an entry of 'answers' is array"),
])
def test_ids_and_answers_of_the_wrong_type_are_refused(toy_dir: Path, field, value, msg) -> None:
    """A float gold id never equals the corpus's "6"; a SQuAD-style or nested answer would be scored as its Python
    text (EM 0): both name the file, line and question."""
    rec = {"id": "a", "question": "?", "answers": ["x"], "gold_ids": ["0"], field: value}
    (toy_dir / "questions.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError, match=r"questions\.jsonl:1: question 'a': " + msg):
        load_dataset(toy_dir)


def test_dataset_orphan_triples_and_limit(toy_dir: Path) -> None:
    assert len(load_dataset(toy_dir, limit=2).questions) == 2
    with open(toy_dir / "triples.jsonl", "a", encoding="utf-8") as f:
        f.write('{"id": "x", "subject": "s", "predicate": "p", "object": "o", "passage_id": "99"}\n')
    with pytest.raises(DataError, match=r"triples\.jsonl: 1 triples point to passages not in the corpus"):
        load_dataset(toy_dir)


def test_stratified_subset_balanced_nested_and_stable():
    from gear_repro.data.subset import stratified_order, stratified_subset, stratum
    from gear_repro.types import Question

    qs = [Question(f"q{i}", "?", ["a"], ["p"], type=t)
          for i, t in enumerate(["2hop"] * 10 + ["3hop1"] * 4 + ["3hop2"] * 2 + ["4hop1"] * 2)]
    order = stratified_order(qs, seed=0)
    assert sorted(q.id for q in order) == sorted(q.id for q in qs)
    # round robin: the first 3 hold one of each hop count; all 4-hop questions within the first 6
    assert sorted(stratum(q) for q in order[:3]) == ["2hop", "3hop", "4hop"]
    assert sum(stratum(q) == "4hop" for q in order[:6]) == 2
    sizes = [stratified_subset(qs, n, seed=0) for n in (3, 6, 9, 18)]
    for small, big in zip(sizes, sizes[1:], strict=False):
        assert {q.id for q in small} <= {q.id for q in big}  # nested
    assert [q.id for q in sizes[-1]] == [q.id for q in qs]  # dataset order, whole set at full size
    assert stratified_subset(qs, 9, seed=0) == stratified_subset(list(qs), 9, seed=0)


def test_lone_surrogate_escapes_name_the_file_and_line(toy_dir: Path) -> None:
    """A \\ud800 escape decodes to a string no UTF-8 write or hash accepts: refused where it is read, naming the
    line; a valid surrogate pair (an emoji) is text."""
    q = toy_dir / "questions.jsonl"
    q.write_text('{"id": "a", "question": "smile \\ud83d\\ude00", "answers": ["x"], "gold_ids": ["0"]}\n'
                 '{"id": "b", "question": "bad \\ud800 q", "answers": ["x"], "gold_ids": ["0"]}\n')
    with pytest.raises(DataError, match=r"questions\.jsonl:2: question: a \\uXXXX escape encodes a lone UTF-16 "
                                        r"surrogate"):
        load_dataset(toy_dir)


def test_lone_surrogates_from_memory_or_a_json_file_name_the_record_and_field(tmp_path: Path) -> None:
    import gear_repro
    from gear_repro.cli.prepare import prepare

    cfg = gear_repro.compose("retriever=bm25", "dataset.name=toy", "run.progress=false")
    passages = [{"id": "0", "title": "Paris", "text": "ok"}, {"id": "1", "title": "Lille", "text": "cut \ud800 here"}]
    with pytest.raises(DataError, match=r"^passages\[1\]: text: a \\uXXXX escape encodes a lone UTF-16 surrogate"):
        gear_repro.Pipeline.from_config(cfg, passages=passages, data_dir=tmp_path / "mem")
    with pytest.raises(DataError, match=r"^questions\[0\]: question: a \\uXXXX escape"):
        gear_repro.Pipeline.from_config(cfg, passages=passages[:1], data_dir=tmp_path / "mem",
                                        questions=[{"id": "q", "question": "x \udc00"}])
    src = tmp_path / "hipporag.json"
    src.write_text(json.dumps([{"_id": "q1", "question": "ok?", "answer": "x", "supporting_facts": [],
                                "context": [["Paris", ["fine."]], ["Lille", ["cut \ud800 here"]]]}]))
    with pytest.raises(DataError, match=r"hipporag\.json: \[0\]\.context\[1\]\[1\]\[0\]: a \\uXXXX escape"):
        prepare("hotpotqa", src, tmp_path / "prepared")


@pytest.mark.parametrize("file, change, msg", [
    ("corpus.jsonl", {"title": ["Paris", "France"]}, r"corpus\.jsonl:1: field 'title' should be a string, got array"),
    ("questions.jsonl", {"type": ["2hop"]}, r"questions\.jsonl:1: field 'type' should be a string, got array"),
    ("questions.jsonl", {"id": ""}, r"questions\.jsonl:1: field 'id' is empty"),
    ("triples.jsonl", {"subject": True}, r"triples\.jsonl:1: field 'subject' should be .*, got bool"),
])
def test_hand_made_folders_get_prepares_checks(toy_dir: Path, file: str, change: dict, msg: str) -> None:
    """A folder written by hand (not through gear-repro-prepare) indexed a list title as "['Paris', 'France']",
    grouped ``type: ["2hop"]`` as its own hop type, and accepted an empty question id and a boolean triple subject
    ("True"). One record check (data/canonical.py) for the loader and for what prepare writes."""
    from gear_repro.data.canonical import check_records
    from gear_repro.types import Passage, Question, Triple

    path = toy_dir / file
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **change})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=msg):
        load_dataset(toy_dir)
    ok_p, ok_q = Passage("p", "T", "text"), Question("q", "?", ["a"], ["p"])
    field, value = next(iter(change.items()))
    bad = {"corpus.jsonl": lambda: ([Passage("p", value, "text")], [ok_q], None),
           "questions.jsonl": lambda: ([ok_p], [Question(**{**ok_q.to_dict(), field: value})], None),
           "triples.jsonl": lambda: ([ok_p], [ok_q], [Triple("t", value, "p", "o", passage_id="p")])}[file]()
    with pytest.raises(DataError, match=rf"in\.json: (passage|question|triple) '.*': field '{field}'"):
        check_records(*bad, source="in.json")


@pytest.mark.parametrize("part, value, kind", [("subject", "NaN", r"number \(NaN\)"),
                                               ("object", '""', r'an empty string \(""\)'),
                                               ("subject", "1977", r"number \(1977\)"),
                                               ("object", '["Paris"]', r'array \(\["Paris"\]\)')])
def test_a_triple_part_that_is_no_text_names_file_and_line(tmp_path: Path, part: str, value: str, kind: str) -> None:
    """A triple whose subject was NaN loaded as the entity "nan" (an empty one as "", a number as its digits): a
    graph node no passage names. Each part must be a non-empty string; the error names file, line and field."""
    path = tmp_path / "triples.jsonl"
    good = {"id": "0-0", "subject": "Paris", "predicate": "capital of", "object": "France", "passage_id": "0"}
    bad = json.dumps({**good, "id": "0-1"}).replace(json.dumps(good[part]), value, 1)
    path.write_text(json.dumps(good) + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:2: field '{part}' should be a non-empty string, "
                                        rf"got {kind}$"):
        load_triples(path)
