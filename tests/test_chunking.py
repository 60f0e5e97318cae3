"""Document chunking in gear-repro-prepare."""

from __future__ import annotations

import pytest

from gear_repro.data.chunking import chunk_corpus, chunk_text
from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.errors import ConfigError


def test_windows_overlap_and_end_at_the_end():
    w = [str(i) for i in range(10)]
    assert chunk_text(w, 4, 1) == [w[0:4], w[3:7], w[6:10]]
    assert chunk_text(w, 4, 0) == [w[0:4], w[4:8], w[6:10]]
    assert chunk_text(w[:3], 4, 1) == [w[:3]]


def test_gold_ids_and_triples_follow_the_chunks():
    long = Passage("p1", "T", "alpha beta gamma delta epsilon zeta eta theta")
    short = Passage("p2", "S", "one two")
    q = Question("q", "?", ["a"], ["p1", "p2"])
    ts = [Triple("t1", "Zeta", "r", "x", "p1"), Triple("t2", "nobody", "r", "y", "p1"), Triple("t3", "one", "r", "z", "p2")]
    ps, qs, tr, stats = chunk_corpus([long, short], [q], ts, size=5, overlap=2)
    assert [p.id for p in ps] == ["p1#0", "p1#1", "p2"]
    assert ps[1].text == "delta epsilon zeta eta theta" and ps[1].title == "T"
    assert qs[0].gold_ids == ["p1#0", "p1#1", "p2"]
    assert [t.passage_id for t in tr] == ["p1#1", "p1#0", "p2"]
    assert stats["chunks"] == 3 and stats["documents_split"] == 1
    assert chunk_corpus([long], [q], None, 0)[0] == [long]
    with pytest.raises(ConfigError):
        chunk_corpus([long], [q], None, 4, 4)
