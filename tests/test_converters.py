"""Converters on the real samples in ../shared/data and on small hand-made fixtures."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from gear_repro.cli.prepare import main as prepare_main
from gear_repro.data import load_dataset
from gear_repro.data.converters import (
    FORMATS,
    MISSING_PREFIX,
    join_sentences,
    musique_hop_type,
)
from gear_repro.data.openie import import_hipporag_openie
from gear_repro.types import Passage
from gear_repro.utils.errors import DataError
from tests.helpers.requirements import missing

REPO = Path(__file__).resolve().parent.parent
MQ_OPENIE = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


@pytest.fixture(scope="module")
def shared() -> Path:
    root = Path(os.environ.get("GEAR_SHARED_DATA", REPO.parent / "shared" / "data"))
    if not root.is_dir():
        missing(f"real samples not found at {root} (set GEAR_SHARED_DATA to the shared data folder)")
    return root


@pytest.fixture(scope="module")
def musique(shared: Path):
    d = shared / "musique_sample"
    return FORMATS["musique"](d / "musique_train_100.json", corpus=d / "musique_train_100_corpus.json")


def _write(path: Path, obj, jsonl: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in obj) if jsonl else json.dumps(obj), encoding="utf-8")
    return path


def _gold_titles(conv, qid: str) -> list[str]:
    by_id = {p.id: p for p in conv.passages}
    q = next(q for q in conv.questions if q.id == qid)
    return [by_id[g].title if g in by_id else g for g in q.gold_ids]


# --------------------------------------------------------------------------- real samples

def test_musique_sample_with_corpus(musique) -> None:
    s = musique.stats
    assert (s["questions"], s["passages"], s["gold_refs"], s["gold_not_found"]) == (100, 1890, 237, 0)
    assert s["questions_all_gold_found"] == 100
    assert s["types"] == {"2hop": 68, "3hop1": 24, "3hop2": 3, "4hop1": 3, "4hop3": 2}
    q0 = musique.questions[0]
    assert q0.id == "2hop__150763_14904" and q0.type == "2hop"
    assert q0.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert q0.gold_ids == ["6", "10"]  # position ids in the corpus file
    assert Counter(len(q.gold_ids) for q in musique.questions) == {2: 68, 3: 27, 4: 5}
    ids = {p.id for p in musique.passages}
    assert all(g in ids for q in musique.questions for g in q.gold_ids)


def test_musique_sample_union_corpus_matches_file_corpus(shared: Path, musique) -> None:
    union = FORMATS["musique"](shared / "musique_sample" / "musique_train_100.json")
    assert union.stats["passages"] == 1890 and union.stats["paragraphs_deduplicated"] == 2000 - 1890

    def gold_texts(conv):
        by_id = {p.id: p for p in conv.passages}
        return [[(by_id[g].title, by_id[g].text) for g in q.gold_ids] for q in conv.questions]

    assert gold_texts(union) == gold_texts(musique)


def test_musique_openie_import(shared: Path, musique) -> None:
    triples, st = import_hipporag_openie(shared / "musique_sample" / MQ_OPENIE, musique.passages)
    assert (st["docs"], st["docs_matched"], st["triples_in_file"]) == (1890, 1890, 17419)
    assert st["dropped_by_reason"] == {"wrong_arity": 185, "duplicate_in_passage": 30}
    assert st["triples_kept"] == len(triples) == 17204
    assert (st["passages_with_triples"], st["passages_without_triples"]) == (1888, 2)
    assert triples[0].id == "0-0" and triples[0].as_tuple() == (
        "Journal of Mathematical Physics", "published by", "American Institute of Physics")
    assert len({t.id for t in triples}) == len(triples)


def test_hotpotqa_sample(shared: Path) -> None:
    conv = FORMATS["hotpotqa"](shared / "hotpotqa_sample" / "hotpotqa_train_25.json")
    s = conv.stats
    assert (s["questions"], s["passages"], s["gold_refs"], s["gold_not_found"]) == (25, 250, 50, 0)
    assert s["types"] == {"bridge": 18, "comparison": 7}
    assert sorted(_gold_titles(conv, "5a77ec115542992a6e59dff7")) == ["Alû", "Lilu (mythology)"]
    demon = next(p for p in conv.passages if p.title == "Demon Dice")
    assert "and Tim Brown. In it, each player" in demon.text  # sentences keep one space


def test_2wiki_hipporag_sample(shared: Path) -> None:
    d = shared / "2wiki_sample"
    conv = FORMATS["2wiki_hipporag"](d / "2wikimultihopqa_questions_300.json", corpus=d / "2wikimultihopqa_corpus.json")
    s = conv.stats
    assert (s["questions"], s["passages"], s["gold_refs"], s["gold_found"], s["gold_not_found"]) == (
        300, 6119, 737, 662, 75)
    assert (s["questions_all_gold_found"], s["questions_some_gold_missing"], s["questions_no_gold_found"]) == (
        232, 60, 8)
    assert s["types"] == {"bridge_comparison": 69, "comparison": 76, "compositional": 120, "inference": 35}
    assert _gold_titles(conv, "83bf3b5a0bd911eba7f7acde48001122") == ["Lothair II", "Ermengarde of Tours"]
    q = next(q for q in conv.questions if q.id == "265daf200bdc11eba7f7acde48001122")
    assert MISSING_PREFIX + "Maurice of Nassau" in q.gold_ids  # kept as a miss, never dropped
    # '"When The Stars Go Blue' (stray quote, other case) matches the title 'When the Stars Go Blue'
    assert any("When the Stars Go Blue" in _gold_titles(conv, q.id) for q in conv.questions)


def test_hipporag_format_dispatches_on_record_shape(shared: Path, musique, tmp_path: Path) -> None:
    d = shared / "musique_sample"
    conv = FORMATS["hipporag"](d / "musique_train_100.json", corpus=d / "musique_train_100_corpus.json")
    assert [q.gold_ids for q in conv.questions] == [q.gold_ids for q in musique.questions]
    assert conv.questions[0].dataset == "musique"  # from the HippoRAG file name
    w = FORMATS["hipporag"](shared / "2wiki_sample" / "2wikimultihopqa_questions_300.json",
                            corpus=shared / "2wiki_sample" / "2wikimultihopqa_corpus.json")
    assert w.stats["gold_found"] == 662 and w.questions[0].dataset == "2wikimultihopqa"
    # HotpotQA questions + a HippoRAG corpus file with explicit (shuffled) idx
    hq = FORMATS["hotpotqa"](shared / "hotpotqa_sample" / "hotpotqa_train_25.json")
    corpus = _write(tmp_path / "hotpotqa_corpus.json",
                    [{"idx": 1000 + int(p.id), "title": p.title, "text": p.text} for p in reversed(hq.passages)])
    hp = FORMATS["hipporag"](shared / "hotpotqa_sample" / "hotpotqa_train_25.json", corpus=corpus)
    assert hp.stats["gold_not_found"] == 0 and hp.questions[0].dataset == "hotpotqa"
    assert [q.gold_ids for q in hp.questions] == [[str(1000 + int(g)) for g in q.gold_ids] for q in hq.questions]


def test_limit_keeps_first_questions(shared: Path) -> None:
    conv = FORMATS["musique"](shared / "musique_sample" / "musique_train_100.json", limit=3)
    assert len(conv.questions) == 3 and conv.stats["questions_in_file"] == 100
    assert conv.stats["passages"] <= 60  # union of 3 x 20 paragraphs


def test_bundled_sample_is_consistent(shared: Path) -> None:
    ds = load_dataset(REPO / "data" / "musique_sample")
    assert (len(ds.passages), len(ds.questions), len(ds.triples or [])) == (1890, 100, 17204)
    assert ds.warnings == {}
    assert all(2 <= len(q.gold_ids) <= 4 for q in ds.questions)


# --------------------------------------------------------------------------- hand-made fixtures

def test_helpers() -> None:
    assert [musique_hop_type(x) for x in ("2hop__1_2", "3hop1__1_2_3", "4hop3__a", "x__1", "2hop")] == [
        "2hop", "3hop1", "4hop3", "", ""]
    assert join_sentences(["A b.", " C d.", "E f."]) == "A b. C d. E f."


def test_musique_fixture_types_aliases(tmp_path: Path) -> None:
    recs = [
        {"id": "3hop1__1_2_3", "question": "q1?", "answer": "X", "answer_aliases": ["x1", "X"],
         "paragraphs": [{"idx": 0, "title": "A", "paragraph_text": "a text", "is_supporting": True},
                        {"idx": 1, "title": "B", "paragraph_text": "b text", "is_supporting": False},
                        {"idx": 2, "title": "C", "paragraph_text": "c text", "is_supporting": True}]},
        {"id": "odd_id", "question": "q2?", "answer": "Y", "answer_aliases": [],
         "paragraphs": [{"idx": 0, "title": "C", "paragraph_text": "c text", "is_supporting": True}]},
    ]
    conv = FORMATS["musique"](_write(tmp_path / "m.jsonl", recs, jsonl=True))
    assert [p.title for p in conv.passages] == ["A", "B", "C"]
    q1, q2 = conv.questions
    assert (q1.type, q1.answers, q1.gold_ids) == ("3hop1", ["X", "x1"], ["0", "2"])
    assert (q2.type, q2.gold_ids) == ("", ["2"])


def test_2wiki_native_fixture(tmp_path: Path) -> None:
    recs = [{"_id": "w1", "type": "compositional", "question": "Who?", "answer": "Z", "answer_aliases": ["Zed"],
             "context": [["P", ["P was born.", "P died."]], ["Q", ["Q is a place."]]],
             "supporting_facts": [["P", 0], ["P", 1], ["R", 0]],
             "evidences": [["P", "born in", "Q"]]}]
    conv = FORMATS["2wiki"](_write(tmp_path / "dev.json", recs))
    q = conv.questions[0]
    assert conv.passages[0].text == "P was born. P died."
    assert (q.type, q.answers, q.dataset) == ("compositional", ["Z", "Zed"], "2wikimultihopqa")
    assert q.gold_ids == ["0", MISSING_PREFIX + "R"]  # R is not in any context: counted miss
    assert conv.stats["gold_not_found"] == 1 and conv.stats["questions_some_gold_missing"] == 1


IRCOT = [
    {"question_id": "2hop__11_22", "question_text": "Who is the spouse of the Green performer?",
     "answers_objects": [{"number": "", "date": {"day": "", "month": "", "year": ""},
                          "spans": ["Miquette Giraudy"]}],
     "contexts": [{"idx": 0, "title": "Green (album)", "paragraph_text": "Green is an album by  Steve Hillage.",
                   "is_supporting": True},
                  {"idx": 1, "title": "Miquette Giraudy", "paragraph_text": "Miquette Giraudy is the partner of "
                   "Steve Hillage.", "is_supporting": True},
                  {"idx": 2, "title": "Noise", "paragraph_text": "Unrelated text.", "is_supporting": False}]},
    {"question_id": "3hop1__1_2_3", "question_text": "Another?",
     "answers_objects": [{"spans": ["A1", "a one"]}, {"spans": ["A1"]}],
     "contexts": [{"idx": 0, "title": "Noise", "paragraph_text": "Unrelated text.", "is_supporting": True}]},
]


def test_ircot_fixture_with_and_without_corpus(tmp_path: Path) -> None:
    qfile = _write(tmp_path / "processed_data" / "musique" / "test_subsampled.jsonl", IRCOT, jsonl=True)
    union = FORMATS["ircot"](qfile)
    assert union.stats["passages"] == 3 and union.stats["paragraphs_deduplicated"] == 1
    assert [q.gold_ids for q in union.questions] == [["0", "1"], ["2"]]
    assert union.questions[1].answers == ["A1", "a one"] and union.questions[1].type == "3hop1"
    assert union.questions[0].dataset == "musique"
    corpus = _write(tmp_path / "corpus.jsonl", [
        {"id": "d9", "title": "Noise", "text": "Unrelated text."},
        {"id": "d7", "title": "green (album)", "text": "Green is an album by Steve Hillage."},  # case/space differ
        {"id": "d8", "title": "Miquette Giraudy", "text": "Miquette Giraudy is the partner of Steve Hillage."},
    ], jsonl=True)
    conv = FORMATS["ircot"](qfile, corpus=corpus)
    assert [q.gold_ids for q in conv.questions] == [["d7", "d8"], ["d9"]]
    assert conv.stats["gold_matched_by"] == {"key": 3}


def test_openie_fixture_counts_every_drop(tmp_path: Path) -> None:
    passages = [Passage("p0", "Alpha", "Alpha is a thing."), Passage("p1", "Beta", "Beta is another.")]
    data = {"docs": [
        {"passage": "Alpha\nAlpha is a thing.", "extracted_entities": ["Alpha"], "extracted_triples": [
            ["Alpha", "is", "thing"], ["Alpha", "is"], ["Alpha", " ", "x"], ["Alpha", 3, "x"],
            ["Alpha", "is", "thing"], ["Alpha", "is  a", " kind "]]},
        {"title": "Beta", "text": "Beta is another.", "passage": "Beta\nBeta is another.",
         "extracted_triples": []},
        {"passage": "Gamma\nNot in corpus.", "extracted_triples": [["G", "r", "o"]]},
    ]}
    triples, st = import_hipporag_openie(_write(tmp_path / "openie.json", data), passages)
    assert [t.id for t in triples] == ["p0-0", "p0-1"]
    assert triples[1].as_tuple() == ("Alpha", "is a", "kind")  # trimmed, spaces squeezed
    assert st["dropped_by_reason"] == {"wrong_arity": 1, "empty_part": 1, "non_string_part": 1,
                                       "duplicate_in_passage": 1, "doc_not_in_corpus": 1}
    assert (st["docs"], st["docs_matched"], st["docs_unmatched"]) == (3, 2, 1)
    assert st["docs_matched_by"] == {"passage": 1, "title_text": 1, "none": 1}
    assert (st["passages_with_triples"], st["passages_without_triples"]) == (1, 1)


def test_prepare_cli_end_to_end(tmp_path: Path, capsys) -> None:
    qfile = _write(tmp_path / "q.jsonl", IRCOT, jsonl=True)
    out = tmp_path / "out"
    assert prepare_main(["--format", "ircot", "--questions", str(qfile), "--out", str(out), "--limit", "1",
                         "--dataset", "musique"]) == 0
    printed = capsys.readouterr().out
    assert "questions: 1 (of 2 in file)" in printed and "0 not found" in printed
    ds = load_dataset(out)
    assert len(ds.questions) == 1 and len(ds.passages) == 3 and ds.triples is None
    stats = json.loads((out / "prepare_stats.json").read_text())
    assert stats["format"] == "ircot" and stats["limit"] == 1 and "questions" in stats["inputs_sha256_16"]


def test_prepare_cli_with_triples_on_real_sample(shared: Path, tmp_path: Path, capsys) -> None:
    d = shared / "musique_sample"
    rc = prepare_main(["--format", "musique", "--questions", str(d / "musique_train_100.json"),
                       "--corpus", str(d / "musique_train_100_corpus.json"),
                       "--triples-hipporag", str(d / MQ_OPENIE), "--out", str(tmp_path / "mq")])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "triples: 17204 kept, 215 dropped" in printed
    for name in ("corpus.jsonl", "questions.jsonl", "triples.jsonl"):
        assert (tmp_path / "mq" / name).read_bytes() == (REPO / "data" / "musique_sample" / name).read_bytes()


def test_2wiki_answer_aliases_from_id_aliases_file(tmp_path: Path) -> None:
    """2wikimultihop_evaluate_v1.1.py:171-200: gold = answer ∪ aliases ∪ demonyms of its answer_id, when the
    data carries the alias file; without it the gold is the answer alone."""
    recs = [{"_id": "w1", "type": "comparison", "question": "Which nationality?", "answer": "United States",
             "answer_id": "Q30", "context": [["P", ["P is here."]]], "supporting_facts": [["P", 0]]}]
    conv = FORMATS["2wiki"](_write(tmp_path / "plain" / "dev.json", recs))
    assert conv.questions[0].answers == ["United States"] and conv.stats["alias_file"] is None
    qfile = _write(tmp_path / "ids" / "dev.json", recs)
    (tmp_path / "ids" / "id_aliases.json").write_text(
        json.dumps({"Q_id": "Q30", "aliases": ["USA", "America"], "demonyms": ["American"]}) + "\n"
        + json.dumps({"Q_id": "Q5", "aliases": ["human"], "demonyms": []}) + "\n")
    conv = FORMATS["2wiki"](qfile)
    assert conv.questions[0].answers == ["United States", "USA", "America", "American"]
    from gear_repro.evaluation.metrics import f1_score

    assert f1_score("American", conv.questions[0].answers, "2wiki") == 1.0
    # a string answer_aliases is one alias with the alias file too, never its letters (the alias "i"
    # gave "World War I" F1 0.5)
    _write(qfile, [recs[0] | {"answer_aliases": "Single Alias"}])
    answers = FORMATS["2wiki"](qfile).questions[0].answers
    assert answers == ["United States", "Single Alias", "USA", "America", "American"]
    assert f1_score("World War I", answers, "2wiki") == 0.0


def test_a_string_in_the_alias_file_is_one_alias_not_its_letters(tmp_path: Path) -> None:
    """id_aliases.json with ``"aliases": "NYC"`` gave the answers "N", "Y", "C" (list() of a string), so
    a one-letter reply scored EM 1; an object there is an error naming the record."""
    recs = [{"_id": "w1", "type": "compositional", "question": "Where?", "answer": "New York", "answer_id": "Q60",
             "context": [["P", ["P is in New York."]]], "supporting_facts": [["P", 0]]}]
    qfile = _write(tmp_path / "dev.json", recs)
    (tmp_path / "id_aliases.json").write_text(json.dumps({"Q_id": "Q60", "aliases": "NYC", "demonyms": "New Yorker"})
                                              + "\n")
    assert FORMATS["2wiki"](qfile).questions[0].answers == ["New York", "NYC", "New Yorker"]
    (tmp_path / "id_aliases.json").write_text(json.dumps({"Q_id": "Q60", "aliases": {"x": 1}}) + "\n")
    with pytest.raises(DataError, match=r"id_aliases.json:1: field 'aliases'"):
        FORMATS["2wiki"](qfile)


def test_a_title_twice_in_one_context_takes_the_paragraph_with_the_supporting_sentence(tmp_path, caplog):
    """HotpotQA/2Wiki supporting facts name a title and a sentence index; when two context paragraphs share the
    title, the gold one is the paragraph that has that sentence, and the conversion says so."""
    import json

    rec = {"_id": "q1", "question": "Where?", "answer": "Amiens", "type": "bridge",
           "context": [["Alu", ["A decoy with one sentence."]], ["Alu", ["Alu is a town.", "It lies near Amiens."]],
                       ["Other", ["Unrelated."]]],
           "supporting_facts": [["Alu", 1]]}
    path = tmp_path / "hp.json"
    path.write_text(json.dumps([rec]))
    with caplog.at_level("WARNING"):
        conv = FORMATS["hotpotqa"](path)
    gold = conv.questions[0].gold_ids
    assert [p.text for p in conv.passages if p.id in gold] == ["Alu is a town. It lies near Amiens."]
    assert "2 context paragraphs share the supporting title 'Alu'" in caplog.text


def test_answers_are_texts_numbers_as_written_and_other_kinds_refused(tmp_path: Path) -> None:
    """A float-written number is scored as "35", not "35.0" (EM 0); a SQuAD-style, nested or bool alias names the
    record instead of becoming its Python text."""
    import json

    from gear_repro.utils.errors import DataError

    rec = {"_id": "q1", "question": "How many?", "answer": 35.0, "answer_aliases": [7, 2.5], "type": "bridge",
           "context": [["Alu", ["Alu has 35 stores."]]], "supporting_facts": [["Alu", 0]]}
    path = tmp_path / "hp.json"
    path.write_text(json.dumps([rec]))
    assert FORMATS["hotpotqa"](path).questions[0].answers == ["35", "7", "2.5"]
    for alias, kind in (({"text": "alias one", "answer_start": 3}, "object"), (["nested"], "array"), (True, "boolean")):
        path.write_text(json.dumps([{**rec, "answer_aliases": [alias]}]))
        with pytest.raises(DataError, match=rf"hp\.json.*an answer is {kind}"):
            FORMATS["hotpotqa"](path)


def test_a_blank_question_is_refused_by_prepare_as_by_the_run(tmp_path: Path) -> None:
    import json

    from gear_repro.utils.errors import DataError

    rec = {"_id": "q1", "question": "   ", "answer": "Amiens", "type": "bridge",
           "context": [["Alu", ["Alu is near Amiens."]]], "supporting_facts": [["Alu", 0]]}
    path = tmp_path / "hp.json"
    path.write_text(json.dumps([rec]))
    with pytest.raises(DataError, match=r"hp\.json.*field 'question' is blank"):
        FORMATS["hotpotqa"](path)


# --------------------------------------------------------------------------- the source dataset

HP_REC = {"_id": "h1", "question": "Where?", "answer": "Amiens", "type": "bridge", "level": "easy",
          "context": [["Alu", ["Alu is near Amiens."]], ["Other", ["Unrelated."]]], "supporting_facts": [["Alu", 0]]}
W2_REC = {"_id": "w1", "question": "Who?", "answer": "Z", "type": "compositional",
          "context": [["P", ["P was born."]]], "supporting_facts": [["P", 0]], "evidences": [["P", "born in", "Q"]]}


def test_hipporag_file_not_named_after_its_dataset_needs_dataset(tmp_path: Path, capsys) -> None:
    """A renamed HippoRAG file said "hipporag" as its dataset, which every dataset group accepted; now prepare
    asks for --dataset, and records it."""
    qfile = _write(tmp_path / "sample.json", [HP_REC])
    corpus = _write(tmp_path / "sample_corpus.json", [{"title": "Alu", "text": "Alu is near Amiens."}])
    args = ["--format", "hipporag", "--questions", str(qfile), "--corpus", str(corpus), "--out", str(tmp_path / "o")]
    assert prepare_main(args) == 2
    err = capsys.readouterr().err
    assert "sample.json: --format hipporag cannot tell which dataset" in err and "--dataset" in err
    assert not (tmp_path / "o").exists()
    assert prepare_main([*args, "--dataset", "hotpotqa"]) == 0
    assert "dataset: hotpotqa (from the --dataset)" in capsys.readouterr().out
    stats = json.loads((tmp_path / "o" / "prepare_stats.json").read_text())
    assert (stats["dataset"], stats["dataset_from"]) == ("hotpotqa", "--dataset")
    assert load_dataset(tmp_path / "o").questions[0].dataset == "hotpotqa"
    # --dataset never contradicts a format that names its dataset
    assert prepare_main(["--format", "musique", "--dataset", "hotpotqa", "--questions", str(qfile),
                         "--out", str(tmp_path / "m")]) == 2
    assert "--format musique reads musique data, not hotpotqa" in capsys.readouterr().err


MQ_REC = {"id": "2hop__1_2", "question": "Where?", "answer": "Amiens",
          "paragraphs": [{"title": "Alu", "paragraph_text": "Alu is near Amiens.", "is_supporting": True}]}


@pytest.mark.parametrize(("fmt", "ok", "rec", "says"), [
    ("hotpotqa", HP_REC, W2_REC,
     r"a 2WikiMultihopQA record \(field 'evidences'\) under --format hotpotqa, which is HotpotQA's: "
     r"use --format 2wiki"),
    ("hotpotqa", HP_REC, {k: v for k, v in W2_REC.items() if k != "evidences"},
     r"a 2WikiMultihopQA record \(type 'compositional'\) under --format hotpotqa, which is HotpotQA's: "
     r"use --format 2wiki"),
    ("2wiki", W2_REC, HP_REC, r"a HotpotQA record \(field 'level'\) under --format 2wiki, which is "
                              r"2WikiMultihopQA's: use --format hotpotqa"),
    ("hipporag", MQ_REC, HP_REC, r"a HotpotQA record \(field 'level'\) but the folder would be recorded as musique "
                                 r"\(from the --dataset\): use --dataset hotpotqa"),
])
def test_a_record_of_the_other_dataset_is_refused(tmp_path: Path, fmt: str, ok: dict, rec: dict, says: str) -> None:
    """HotpotQA and 2Wiki share a layout (and a parser): 2Wiki data under --format hotpotqa was written as HotpotQA
    and scored with its answer script; the record's own fields say which it is."""
    from gear_repro.utils.errors import DataError

    qfile = _write(tmp_path / "dev.json", [ok, rec | {"_id": "x2"}])
    corpus = _write(tmp_path / "c.json", [{"title": "Alu", "text": "Alu is near Amiens."}])
    dataset = "musique" if fmt == "hipporag" else None
    assert FORMATS[fmt](_write(tmp_path / "ok.json", [ok]), corpus=corpus, dataset=dataset).questions
    with pytest.raises(DataError, match=rf"dev\.json\[1\]: {says}"):
        FORMATS[fmt](qfile, corpus=corpus, dataset=dataset)


# --------------------------------------------------------------------------- MuSiQue-Full

def test_unanswerable_musique_records_are_dropped_or_kept_unscored(tmp_path: Path, capsys) -> None:
    """MuSiQue-Full's `answerable: false` twin was converted as answerable: scored EM 1 against the original answer,
    its leftover supporting paragraphs gold. evaluate_v1.0.py:58-60 scores answers and support only when
    answerable: dropped by default (counted, printed), or kept with neither answers nor gold."""
    from gear_repro.data.dataset import check_gold_answers
    from gear_repro.utils.errors import DataError

    twin = MQ_REC | {"answerable": False, "paragraphs": [
        {"title": "Alu", "paragraph_text": "Alu is near Amiens.", "is_supporting": True},
        {"title": "Decoy", "paragraph_text": "A decoy.", "is_supporting": False}]}
    recs = [MQ_REC | {"answerable": True}, twin | {"id": "2hop__1_2_u"}]
    qfile = _write(tmp_path / "full.jsonl", recs, jsonl=True)
    args = ["--format", "musique", "--questions", str(qfile)]
    assert prepare_main([*args, "--out", str(tmp_path / "d")]) == 0
    assert "unanswerable (answerable: false): 1 dropped" in capsys.readouterr().out
    stats = json.loads((tmp_path / "d" / "prepare_stats.json").read_text())
    assert (stats["questions"], stats["questions_in_file"], stats["unanswerable_dropped"], stats["passages"]) == (
        1, 2, 1, 1)
    assert prepare_main([*args, "--keep-unanswerable", "--out", str(tmp_path / "k")]) == 0
    assert "1 kept without answers or gold" in capsys.readouterr().out
    ds = load_dataset(tmp_path / "k")
    assert [(q.id, q.answers, q.gold_ids, q.type) for q in ds.questions][1] == ("2hop__1_2_u", [], [], "2hop")
    assert len(ds.passages) == 2 and ds.warnings == {"questions_without_gold": 1}  # recall skips it
    with pytest.raises(DataError, match="'2hop__1_2_u' has no gold answer"):
        check_gold_answers(ds)  # qa=true refuses it at start-up
    # MuSiQue-Full gives the pair one id: dropping the twin leaves one; keeping both keeps the twin under
    # <id>__unanswerable, whichever comes first (it was a duplicate-id error: the option could not be used on the file)
    same = _write(tmp_path / "same.jsonl", [twin, recs[0]], jsonl=True)
    assert FORMATS["musique"](same).stats["unanswerable_dropped"] == 1
    kept = FORMATS["musique"](same, keep_unanswerable=True)
    assert [(q.id, q.answers, q.type) for q in kept.questions] == [("2hop__1_2__unanswerable", [], "2hop"),
                                                                   ("2hop__1_2", ["Amiens"], "2hop")]
    assert kept.stats["unanswerable_renamed"] == 1
    with pytest.raises(DataError, match=r"same\.jsonl:2: duplicate question id '2hop__1_2' \(first at .*same\.jsonl:1\)"):
        FORMATS["musique"](_write(tmp_path / "same.jsonl", [recs[0], recs[0]], jsonl=True))
    with pytest.raises(DataError, match=r"all 1 records are answerable: false.*--keep-unanswerable"):
        FORMATS["musique"](_write(tmp_path / "u.jsonl", [twin], jsonl=True))


# --------------------------------------------------------------------------- Unicode forms

def test_text_in_another_unicode_form_is_written_in_nfc_and_counted(tmp_path: Path, capsys) -> None:
    """A corpus in NFD (macOS files, some extractions) beside NFC questions lost BM25 recall: its tokenizer splits
    "Jime\u0301nez" around the combining mark. Prepare writes NFC and says how many strings it changed."""
    import unicodedata

    from gear_repro.backends.tokenize import tokenize

    nfd = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
    rec = {"id": "2hop__7_8", "question": "Where was Jiménez born?", "answer": "Málaga", "answer_aliases": ["Malaga"],
           "paragraphs": [{"title": "Jiménez", "paragraph_text": "Jiménez was born in Málaga.", "is_supporting": True},
                          {"title": "Other", "paragraph_text": "Unrelated.", "is_supporting": False}]}
    both = {"nfc": rec, "nfd": rec | {"question": nfd(rec["question"]), "answer": nfd(rec["answer"]), "paragraphs": [
        {**p, "title": nfd(p["title"]), "paragraph_text": nfd(p["paragraph_text"])} for p in rec["paragraphs"]]}}
    assert tokenize([both["nfd"]["paragraphs"][0]["title"]]) != tokenize(["Jiménez"])  # what BM25 would index
    for form, r in both.items():
        qfile = _write(tmp_path / f"{form}.jsonl", [r], jsonl=True)
        assert prepare_main(["--format", "musique", "--questions", str(qfile), "--out", str(tmp_path / form)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("NFC-normalised") == 1
    assert "NFC-normalised (Unicode form; BM25 splits words in another form): 1 passage titles, 1 passage texts, " \
           "1 questions, 1 answers" in printed
    for name in ("corpus.jsonl", "questions.jsonl"):
        assert (tmp_path / "nfd" / name).read_bytes() == (tmp_path / "nfc" / name).read_bytes()
    stats = json.loads((tmp_path / "nfd" / "prepare_stats.json").read_text())
    assert stats["nfc_normalised"] == {"passage_titles": 1, "passage_texts": 1, "questions": 1, "answers": 1}
    # a corpus file in NFD: its passages too
    corpus = _write(tmp_path / "c.json", [{"title": nfd("Jiménez"), "text": nfd("Jiménez was born in Málaga.")}])
    conv = FORMATS["musique"](tmp_path / "nfc.jsonl", corpus=corpus)
    assert conv.passages[0].title == "Jiménez" and conv.questions[0].gold_ids == ["0"]
    assert conv.stats["nfc_normalised"] == {"passage_titles": 1, "passage_texts": 1, "questions": 0, "answers": 0}


def test_openie_triples_are_written_in_nfc(tmp_path: Path) -> None:
    """An NFD triple part ("Jime\u0301nez") is another entity of the triple graph and another BM25 word than the NFC
    passages prepare writes: imported triples are NFC too, and counted."""
    passages = [Passage("p0", "Jiménez", "Jiménez was born in Spain.")]
    nfd = "Jime\u0301nez"
    data = {"docs": [{"passage": f"{nfd}\n{nfd} was born in Spain.",
                      "extracted_triples": [[nfd, "born in", "Spain"], ["Jiménez", "born in", "Spain"]]}]}
    triples, st = import_hipporag_openie(_write(tmp_path / "openie.json", data), passages)
    assert [t.as_tuple() for t in triples] == [("Jiménez", "born in", "Spain")]  # the NFD twin is a repeat
    assert triples[0].subject == "Jim\u00e9nez" and st["nfc_normalised"] == 1
    assert st["dropped_by_reason"] == {"duplicate_in_passage": 1}


def test_a_null_sentence_or_a_list_title_is_an_error_not_python_text(tmp_path: Path) -> None:
    """A null HotpotQA/2Wiki sentence was joined into the passage as the word "None" (indexed by BM25, shown to the
    LLM) and a list title became "['P']" (matched and shown as such): an error naming the record and field. A
    number as title stays its text."""
    para = {"title": "P", "paragraph_text": "P is in New York.", "is_supporting": True}
    hotpot = {"_id": "h1", "type": "bridge", "question": "Where?", "answer": "New York",
              "context": [["P", ["P is", None]]], "supporting_facts": [["P", 0]]}
    musique = {"id": "2hop__1_2", "question": "Where?", "answer": "New York", "paragraphs": [para]}
    cases = [("hotpotqa", hotpot, r"hp.json\[0\]: context\[0\] sentence 1 should be a string, got NoneType"),
             ("hotpotqa", {**hotpot, "context": [[["P"], ["P is."]]]}, r"context\[0\]: title should be a string, "
                                                                       r"got list \(\[\"P\"\]\)"),
             ("musique", {**musique, "paragraphs": [{**para, "title": ["P"]}]}, r"paragraphs\[0\]: title should be")]
    for fmt, rec, error in cases:
        with pytest.raises(DataError, match=error):
            FORMATS[fmt](_write(tmp_path / "hp.json", [rec]))
    converted = FORMATS["musique"](_write(tmp_path / "hp.json", [{**musique, "paragraphs": [{**para, "title": 1984}]}]))
    assert converted.passages[0].title == "1984" and converted.questions[0].gold_ids == [converted.passages[0].id]
