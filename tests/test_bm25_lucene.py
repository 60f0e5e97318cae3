"""The memory backend's BM25 is Lucene's: token for token and rank for rank against the real Lucene 9.5 (the engine
of Elasticsearch 8), on every passage, triple and question of the three bundled samples.

The reference (tests/helpers/lucene_ref.py) is Lucene itself, driven through pyjnius without the harness's code;
``make install-lucene`` (part of ``make test``) installs Java and the jar.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.lucene_bm25 import LENGTH_TABLE, byte4_to_int, int_to_byte4
from gear_repro.backends.memory import MemoryBackend
from gear_repro.backends.tokenize import standard_tokens
from tests.helpers.requirements import missing

SAMPLES = ("musique", "2wiki", "hotpotqa")
DEPTH = 15
# Lucene's own tokens for the cases its StandardTokenizer is known for (issue text of the BM25 reading)
CASES = {"Love's O'Neil don't": ["love's", "o'neil", "don't"], "3.14 and 1,000,000": ["3.14", "and", "1,000,000"],
         "U.S. Army in World War 2": ["u.s", "army", "in", "world", "war", "2"],
         "J. R. R. Tolkien, C++ and AT&T": ["j", "r", "r", "tolkien", "c", "and", "at", "t"],
         "北京大学 İstanbul ΟΔΟΣ": ["北", "京", "大", "学", "istanbul", "οδοσ"], "x" * 300: ["x" * 255, "x" * 45]}


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture(scope="module")
def samples(prepared_samples: dict[str, Path]) -> dict[str, Path]:
    return prepared_samples


def _sample(folder: Path) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(passage id, title + "\\n" + text), questions, triple texts of a prepared sample."""
    docs = [(p["id"], p["title"] + "\n" + p["text"]) for p in _rows(folder / "corpus.jsonl")]
    questions = [q["question"] for q in _rows(folder / "questions.jsonl")]
    triples = [" ".join((t["subject"], t["predicate"], t["object"])) for t in _rows(folder / "triples.jsonl")] \
        if (folder / "triples.jsonl").exists() else []
    return docs, questions, triples


@pytest.fixture(scope="module")
def jar() -> str:
    from gear_repro.backends.lucene import find_jar
    from gear_repro.utils.errors import ConfigError

    try:
        return str(find_jar())
    except ConfigError as e:
        missing(str(e))


def test_smallfloat_length_norms_round_trip_as_lucenes(jar) -> None:
    """One-byte document lengths: our SmallFloat against Lucene's, for every length up to 5,000 and every byte."""
    from tests.helpers.lucene_ref import classes

    classes(jar)  # the JVM starts with the jar on its class path
    from jnius import autoclass

    small = autoclass("org.apache.lucene.util.SmallFloat")
    assert [int_to_byte4(n) for n in range(5000)] == [small.intToByte4(n) & 0xFF for n in range(5000)]
    assert [byte4_to_int(b) for b in range(256)] == [small.byte4ToInt(b if b < 128 else b - 256) for b in range(256)]
    assert LENGTH_TABLE[40] == 40 and LENGTH_TABLE[int_to_byte4(1000)] == LENGTH_TABLE[int_to_byte4(1023)]


def test_standard_tokens_are_lucenes_on_every_sample_text(jar, samples) -> None:
    from tests.helpers.lucene_ref import tokens

    for text, want in CASES.items():
        assert standard_tokens(text) == want == tokens(jar, text)
    texts = [t for f in samples.values() for part in _sample(f) for t in (x[1] if isinstance(x, tuple) else x
                                                                            for x in part)]
    assert len(texts) > 25_000
    differ = [t for t in texts if standard_tokens(t) != tokens(jar, t)]
    assert differ == []


@pytest.mark.parametrize("name", SAMPLES)
def test_memory_bm25_ranks_and_scores_as_lucene(name: str, jar, samples, tmp_path, monkeypatch) -> None:
    """Top-15 ids identical to Lucene's on every question, and every score equal to Lucene's float, bit for bit."""
    from tests.helpers.lucene_ref import LuceneReference

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    docs, questions, _ = _sample(samples[name])
    ref = LuceneReference(jar, docs)
    ours = MemoryBackend().open_collection("passages", [IndexDoc(i, t) for i, t in docs]).bm25(questions, DEPTH)
    for q, r in zip(questions, ours, strict=True):
        ids, scores, _ = ref.search(q, DEPTH)
        assert (r.ids, r.scores) == (ids, scores), q


def test_the_earlier_analysis_stays_selectable(tmp_path, monkeypatch) -> None:
    """``tokenizer=word2 method=bm25s_lucene``: the earlier \\w\\w+ split and bm25s's Lucene variant (its numbers)."""
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    docs = [IndexDoc("a", "Love's labour lost"), IndexDoc("b", "O'Neil loved a U.S. army"), IndexDoc("c", "x y")]
    old = MemoryBackend(bm25={"tokenizer": "word2", "method": "bm25s_lucene"}).open_collection("p", docs)
    new = MemoryBackend().open_collection("p", docs)
    assert old.bm25(["love"], 3)[0].ids == ["a"]  # word2 cut "Love's" into "love" (and dropped "s")
    assert new.bm25(["love"], 3)[0].ids == []  # Lucene keeps "love's" whole
    assert new.bm25(["u.s."], 3)[0].ids == ["b"] and old.bm25(["y"], 3)[0].ids == []  # one-character tokens


def test_the_ascii_fast_path_segments_as_the_general_one() -> None:
    """ASCII text takes a one-regex path; it must cut exactly where the UAX#29 path cuts, also on the separators
    whose joining depends on both neighbours (``a:b``, ``10:30``, ``1,000``, ``a.1``, ``a_.b``, ``'90s``)."""
    import random

    from gear_repro.backends.tokenize import unicode_standard_tokens

    rng = random.Random(0)
    texts = ["a:b 10:30 1,000 1;2 a,b a.1 1.a a_.b __init__ _ 3rd a1.2 students' '90s e.g. U.S. " + "y" * 300,
             *("".join(rng.choice("aB1_.,;:' -") for _ in range(40)) for _ in range(5000))]
    for t in texts:
        assert standard_tokens(t) == unicode_standard_tokens(t), t
