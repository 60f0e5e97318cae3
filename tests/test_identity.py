"""Known data sets recognised by content (gear_repro/data/identity.py, gear_repro/resources/known_datasets.yaml)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from gear_repro.data import load_dataset
from gear_repro.data.canonical import save_corpus, save_questions
from gear_repro.data.converters import FORMATS, load_hipporag_corpus
from gear_repro.data.identity import (
    corpus_identity,
    dataset_identity,
    known_sets,
    questions_identity,
    recognise,
)
from gear_repro.types import Passage, Question
from gear_repro.utils.errors import DataError


def _renamed_copy(sample_dir: Path, out: Path) -> Path:
    """The bundled sample under other passage and question ids, in reversed order, in another folder."""
    ds = load_dataset(sample_dir)
    new_id = {p.id: f"doc-{len(ds.passages) - i}" for i, p in enumerate(ds.passages)}
    save_corpus(out / "corpus.jsonl", [Passage(new_id[p.id], p.title, p.text) for p in reversed(ds.passages)])
    save_questions(out / "questions.jsonl", [
        Question(id=f"q{n:03d}", question=q.question, answers=q.answers, gold_ids=[new_id[g] for g in q.gold_ids],
                 type=q.type, dataset=q.dataset) for n, q in enumerate(reversed(ds.questions))])
    return out


def test_bundled_sample_is_recognised_by_content_and_ids(sample_dir: Path) -> None:
    ident = dataset_identity(load_dataset(sample_dir))
    assert ident["corpus"]["passages"] == 1890 and ident["questions"]["questions"] == 100
    known = recognise(ident["corpus"], ident["questions"])
    assert known is not None
    assert (known.name, known.dataset, known.split) == ("musique_train_100", "MuSiQue", "train")
    assert (known.corpus_matched_by, known.questions_matched_by, known.questions, known.questions_of) == (
        "content", "ids", 100, 100)
    assert not known.is_subset and known.used_by == ()


def test_renamed_reordered_copy_is_the_same_corpus(sample_dir: Path, tmp_path: Path) -> None:
    """Other passage ids, other order, other folder and file format: the same content hash; the questions under
    other ids are no longer the sample's ids, but their count still says 100 of the known set."""
    copy = load_dataset(_renamed_copy(sample_dir, tmp_path / "renamed"))
    ref = corpus_identity(load_dataset(sample_dir).passages)
    assert corpus_identity(copy.passages) == ref
    # the same passages as a HippoRAG JSON list with its own idx numbers (another file format)
    listed = tmp_path / "other_name.json"
    listed.write_text(json.dumps([{"idx": 7000 + i, "title": p.title, "text": p.text}
                                  for i, p in enumerate(copy.passages)]), encoding="utf-8")
    assert corpus_identity(load_hipporag_corpus(listed)) == ref
    known = recognise(corpus_identity(copy.passages), questions_identity(copy.questions))
    assert known is not None and known.name == "musique_train_100" and known.corpus_matched_by == "content"
    assert known.questions_matched_by == "none"  # 100 other ids: not the sample's question set


def test_one_changed_passage_is_not_recognised(sample_dir: Path) -> None:
    passages = list(load_dataset(sample_dir).passages)
    p = passages[17]
    passages[17] = Passage(p.id, p.title, p.text.replace(" ", "  ", 1) + ".")  # one passage edited
    ident = corpus_identity(passages)
    assert ident["passages"] == 1890 and ident["content_sha256"] != corpus_identity(
        load_dataset(sample_dir).passages)["content_sha256"]
    assert recognise(ident, questions_identity(load_dataset(sample_dir).questions)) is None


def test_hash_ignores_unicode_form_and_surrounding_space() -> None:
    a = [Passage("1", "Jiménez", "Jiménez was born."), Passage("2", "B", "b")]
    b = [Passage("x", "B ", " b"), Passage("y", unicodedata.normalize("NFD", "Jiménez"),
                                             unicodedata.normalize("NFD", "Jiménez was born."))]
    assert corpus_identity(a) == corpus_identity(b)
    assert corpus_identity(a)["content_sha256"] != corpus_identity(a + [a[1]])["content_sha256"]  # a multiset


def test_limit_is_a_subset_checked_by_ids(sample_dir: Path) -> None:
    ds = load_dataset(sample_dir, limit=30, subset="stratified", subset_seed=3)
    known = recognise(*dataset_identity(ds).values())
    assert known is not None and known.name == "musique_train_100"
    assert (known.questions_matched_by, known.questions, known.questions_of, known.is_subset) == (
        "ids_subset", 30, 100, True)
    assert "30 of 100 questions, by ids" in known.label


def test_a_count_never_matches_a_question_set() -> None:
    """The papers' full sets are not on these machines: their corpora are recognised by their counts (and the match
    says so), their questions never are: 500 questions over 139,416 passages were "IRCoT's 500 test questions"."""
    corpus = {"passages": 139416, "content_sha256": "0" * 64}
    full = recognise(corpus, {"questions": 500, "ids_sha256": "1" * 64, "ids": [f"q{i}" for i in range(500)]})
    assert full is not None and full.name == "ircot_musique"
    assert (full.corpus_matched_by, full.questions_matched_by, full.matched) == ("count", "none", ())
    assert "no ids" in full.why_not and "a count is no match" in full.why_not
    assert "GEAR Table 2" in full.used_by and "GRIEVER Table 1" in full.used_by
    part = recognise(corpus, {"questions": 100, "ids_sha256": "2" * 64, "ids": [f"q{i}" for i in range(100)]})
    assert part is not None and part.questions_matched_by == "none" and not part.is_subset
    chunks = recognise({"passages": 148793, "content_sha256": "0" * 64})
    assert chunks is not None and chunks.name == "gear_musique_chunks"
    assert recognise({"passages": 139417, "content_sha256": "0" * 64}) is None


def test_a_full_set_registered_by_its_ids_hash_is_matched_by_it(tmp_path: Path) -> None:
    """Where a full set's ids cannot ship, the hash of its sorted ids (and texts) recognises that whole set; a
    subset of it cannot be checked and is no match."""
    qs = [Question(f"q{i}", f"question {i}?", ["a"], []) for i in range(5)]
    ident = questions_identity(qs)
    reg = tmp_path / "known.yaml"
    reg.write_text("datasets:\n  - {name: full, dataset: MuSiQue, source: s, split: test, questions: 5, passages: 7,"
                   f" ids_sha256: {ident['ids_sha256']}, texts_sha256: {ident['texts_sha256']}}}\n")
    corpus = {"passages": 7, "content_sha256": "0" * 64}
    assert recognise(corpus, ident, known_sets(reg)).questions_matched_by == "ids"
    other_text = questions_identity([*qs[:4], Question("q4", "another question?", ["a"], [])])
    assert recognise(corpus, other_text, known_sets(reg)).questions_matched_by == "none"
    assert recognise(corpus, questions_identity(qs[:3]), known_sets(reg)).questions_matched_by == "none"


def test_same_counts_name_the_other_candidates() -> None:
    """HippoRAG's and HippoRAG 2's MuSiQue sets have the same counts: the first registered is returned and the
    other named, never silently taken for the same data."""
    known = recognise({"passages": 11656, "content_sha256": "0" * 64}, {"questions": 1000, "ids_sha256": "x",
                                                                        "ids": []})
    assert known is not None and known.name == "hipporag_musique"
    assert known.alternatives == ("hipporag2_musique",)


def test_shared_2wiki_sample_is_300_of_hipporags_1000(shared_data: Path) -> None:
    d = shared_data / "2wiki_sample"
    conv = FORMATS["2wiki_hipporag"](d / "2wikimultihopqa_questions_300.json",
                                     corpus=d / "2wikimultihopqa_corpus.json")
    known = recognise(corpus_identity(conv.passages), questions_identity(conv.questions))
    assert known is not None and known.name == "hipporag_2wiki_300"
    assert (known.corpus_matched_by, known.questions_matched_by, known.questions, known.questions_of) == (
        "content", "ids", 300, 1000)
    assert known.subset_of == "hipporag_2wiki" and known.is_subset
    assert known.alternatives[:2] == ("hipporag_2wiki", "hipporag2_2wiki")
    # HippoRAG 2's set (T²RAG) has the same counts but no ids here: its corpus matches, its questions do not
    assert known.matched == ("hipporag_2wiki_300", "hipporag_2wiki")


def _2wiki_sample(shared_data: Path):
    d = shared_data / "2wiki_sample"
    return FORMATS["2wiki_hipporag"](d / "2wikimultihopqa_questions_300.json", corpus=d / "2wikimultihopqa_corpus.json")


def test_copies_of_the_2wiki_sample_under_other_ids_are_not_its_questions(shared_data: Path) -> None:
    """A file that leaves out all 300 registered ids and repeats 300 questions under `_copy` ids was "300 of
    HippoRAG's 1,000" by count."""
    conv = _2wiki_sample(shared_data)
    copies = [Question(f"{q.id}_copy", q.question, q.answers, q.gold_ids) for q in conv.questions]
    known = recognise(corpus_identity(conv.passages), questions_identity(copies))
    assert known is not None and known.name in ("hipporag_2wiki_300", "hipporag_2wiki")
    assert known.questions_matched_by == "none" and known.matched == () and not known.is_subset
    assert "300 of its 300 question ids are not" in known.why_not
    # one foreign id in a subset: not a subset of the set
    some = [*conv.questions[:9], copies[9]]
    assert recognise(corpus_identity(conv.passages), questions_identity(some)).matched == ()


def test_the_2wiki_sample_ids_with_other_question_texts_are_not_its_questions(shared_data: Path,
                                                                              sample_dir: Path) -> None:
    """HippoRAG's 2Wiki corpus with the sample's ids but MuSiQue question texts."""
    conv = _2wiki_sample(shared_data)
    musique = load_dataset(sample_dir).questions
    swapped = [Question(q.id, musique[i % len(musique)].question, q.answers, q.gold_ids)
               for i, q in enumerate(conv.questions)]
    known = recognise(corpus_identity(conv.passages), questions_identity(swapped))
    assert known is not None and known.questions_matched_by == "none" and known.matched == ()
    assert "300 of its 300 questions ask other questions" in known.why_not
    one = [*conv.questions[:50], swapped[50]]
    assert recognise(corpus_identity(conv.passages), questions_identity(one)).why_not.startswith("1 of its 51")


def test_registry_hashes_match_the_bundled_sample(sample_dir: Path) -> None:
    """A stale registry hash (the sample re-prepared another way) fails here, not as a silent 'unknown data'."""
    entry = next(k for k in known_sets() if k.name == "musique_train_100")
    ident = dataset_identity(load_dataset(sample_dir))
    assert (entry.corpus_sha256, entry.ids_sha256, entry.texts_sha256) == (
        ident["corpus"]["content_sha256"], ident["questions"]["ids_sha256"], ident["questions"]["texts_sha256"])
    assert entry.texts == ident["questions"]["texts"]


def test_bad_registry_names_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "known.yaml"
    bad.write_text("datasets:\n  - {name: a, dataset: MuSiQue, source: s, split: dev, questions: 0, passages: 5}\n")
    with pytest.raises(DataError, match=r"known\.yaml: datasets\[0\] \(a\): 'questions' should be a positive"):
        known_sets(bad)
    bad.write_text("datasets:\n  - {name: a, dataset: M, source: s, split: dev, questions: 5, passages: 5,"
                   " subset_of: b}\n")
    with pytest.raises(DataError, match=r"a\.subset_of 'b' is no registered set"):
        known_sets(bad)


def test_duplicate_question_ids_refused() -> None:
    q = Question("q1", "?", ["a"], [])
    with pytest.raises(DataError, match="question id 'q1' appears twice"):
        questions_identity([q, q])
