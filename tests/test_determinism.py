"""Issue 9 §1: a text's vector and a question's ranking do not depend on what else was encoded or retrieved
in the same call (alone, in a sweep, after a resume)."""

from __future__ import annotations

import numpy as np
import pytest

from gear_repro.backends.memory import top_k_dense
from tests.helpers.requirements import missing

TEXTS = ["Who is the spouse of the Green performer?", "Paris",
         "Kingdom of the Netherlands country Netherlands Antilles",
         "The Mekong river flows through six countries of Southeast Asia before reaching the South China Sea",
         "Marie Curie won Nobel Prize in Physics", "a b", "1986 FIFA World Cup held in Mexico",
         "What county is the city where the author of Dune was born in?"]


@pytest.fixture(scope="module")
def embedder():
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    return SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)


@pytest.mark.slow
def test_query_vectors_do_not_depend_on_the_batch(embedder) -> None:
    from gear_repro.embedding import SentenceEmbedder

    alone = np.stack([SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False).encode([t])[0]
                      for t in TEXTS])
    fresh = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)
    fresh._model = embedder.model  # same weights, empty query cache
    in_batch = fresh.encode(TEXTS[::-1])[::-1]
    assert np.array_equal(alone, in_batch)  # bit for bit, not just close


def test_dense_scores_do_not_depend_on_other_queries() -> None:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((500, 64)).astype(np.float32)
    qs = rng.standard_normal((7, 64)).astype(np.float32)
    together = top_k_dense(m, qs, 20)
    for i in range(len(qs)):
        idx, sc = top_k_dense(m, qs[i:i + 1], 20)[0]
        assert np.array_equal(idx, together[i][0]) and np.array_equal(sc, together[i][1])
