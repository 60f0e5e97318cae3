"""scripts/make_fullsize_corpus.py: a seeded corpus grown from the bundled sample that gear-repro-prepare reads,
with the sample's questions and gold intact, local entities renamed and corpus-wide ones (hubs) kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data" / "musique_sample"
sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict]:
    if not (SHARED / "musique_train_100.json").is_file():
        pytest.skip(f"{SHARED} not present (the sample's native files)")
    from make_fullsize_corpus import generate

    out = tmp_path_factory.mktemp("fullsize")
    stats = generate(out / "a", 2400, 24_000, 0, REPO / "data" / "musique_sample", SHARED)
    return out, stats


def test_sizes_and_determinism(corpus) -> None:
    out, stats = corpus
    from make_fullsize_corpus import generate

    assert stats["chunks"] == 2400 and stats["distractors"] == 510
    assert 23_000 < stats["triples_in_openie"] < 25_000  # the template weights hit the asked triples per chunk
    again = generate(out / "b", 2400, 24_000, 0, REPO / "data" / "musique_sample", SHARED)
    assert again == stats
    assert (out / "a" / "openie.json").read_bytes() == (out / "b" / "openie.json").read_bytes()
    other = generate(out / "c", 2400, 24_000, 1, REPO / "data" / "musique_sample", SHARED)
    assert (out / "c" / "openie.json").read_bytes() != (out / "a" / "openie.json").read_bytes()
    assert other["chunks"] == 2400


def test_prepare_reads_it_with_every_gold_passage(corpus) -> None:
    from gear_repro.cli.prepare import prepare

    out, _ = corpus
    raw = out / "a"
    st = prepare("musique", raw / "questions.json", out / "prepared", corpus=raw / "corpus.json",
                 triples_hipporag=raw / "openie.json", dataset="musique")
    assert st["passages"] == 2400 and st["questions"] == 100
    assert st["gold_found"] == st["gold_refs"] == 237
    sample = [json.loads(x) for x in (REPO / "data" / "musique_sample" / "corpus.jsonl").read_text().splitlines()]
    got = [json.loads(x) for x in (out / "prepared" / "corpus.jsonl").read_text().splitlines()]
    assert [(p["title"], p["text"]) for p in got[:1890]] == [(p["title"], p["text"]) for p in sample]


def test_local_entities_renamed_hubs_kept(corpus) -> None:
    out, _ = corpus
    docs = json.loads((out / "a" / "openie.json").read_text())["docs"]
    sample_titles = {d["title"] for d in docs[:1890]}
    ents = [e for d in docs[1890:] for t in d["extracted_triples"] for e in (t[0], t[2])]
    assert sum(e.casefold() == "united states" for e in ents) > 0  # a corpus-wide entity keeps its name
    renamed = [d for d in docs[1890:] if d["title"] not in sample_titles]
    assert len(renamed) > 0.8 * len(docs[1890:])  # titles are mostly local entities: renamed
    d = renamed[0]
    for s, _, _o in d["extracted_triples"]:  # a renamed entity is renamed in the text as well
        assert s in d["text"] or s in d["title"] or s.casefold() in d["text"].casefold()
