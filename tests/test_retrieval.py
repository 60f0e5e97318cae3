"""Memory backend and base retrievers on a toy corpus and on the bundled MuSiQue sample."""

from __future__ import annotations

import numpy as np
import pytest

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryBackend, top_k_dense
from gear_repro.backends.tokenize import analyse, tokenize
from gear_repro.data import load_dataset
from gear_repro.embedding import SentenceEmbedder
from gear_repro.retrieval import BM25Retriever, DenseRetriever, HybridRetriever
from tests.conftest import TOY_PASSAGES

DOCS = [IndexDoc(str(i), f"{t}\n{x}") for i, (t, x) in enumerate(TOY_PASSAGES)]


@pytest.fixture(scope="module")
def minilm():
    return SentenceEmbedder("all-MiniLM-L6-v2", show_progress=False)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_tokenize_stems_and_drops_stopwords_only_when_asked():
    """The analysis functions default to ES's standard analysis, as the backend does (no English trap for a caller)."""
    assert tokenize(["The rivers are flowing"], "en", "english") == [["river", "flow"]]
    assert tokenize(["The rivers are flowing"]) == [["the", "rivers", "are", "flowing"]]
    assert analyse(["The rivers' O'Neil"], "standard", "en", "english") == [["river", "o'neil"]]
    assert analyse(["The rivers' O'Neil"]) == [["the", "rivers", "o'neil"]]


def test_bm25_ranks_and_scores(isolated_cache):
    coll = MemoryBackend().open_collection("p", DOCS)
    r = BM25Retriever(coll).retrieve("capital of Germany", 3)
    assert r.ids[0] == "1"
    assert r.scores == sorted(r.scores, reverse=True)
    assert len(BM25Retriever(coll).retrieve("capital", 100)) == 2  # only matching docs, k > n is fine
    # the default is Elasticsearch's standard analysis (GEAR App. B.1): stop words are terms, words are not stemmed
    assert coll.bm25_params["stopwords"] is None and coll.bm25_params["stemmer"] is None
    assert BM25Retriever(coll).retrieve("the of", 3).ids[:2] == ["1", "0"]  # "the capital of": both words
    assert BM25Retriever(coll).retrieve("rivers", 3).ids == []  # no stemming: "rivers" is not "river"
    english = MemoryBackend(bm25={"analyzer": "english"}).open_collection("p", DOCS)
    assert BM25Retriever(english).retrieve("the of and", 3).ids == []  # stop words only
    assert BM25Retriever(english).retrieve("rivers", 3).ids == ["5", "4"]


def test_bm25_index_is_cached_by_content(isolated_cache):
    coll = MemoryBackend().open_collection("p", DOCS)
    coll.bm25(["x"], 1)
    built = sorted((isolated_cache / "indexes").iterdir())
    assert len(built) == 1
    MemoryBackend().open_collection("p", DOCS).bm25(["x"], 1)
    assert sorted((isolated_cache / "indexes").iterdir()) == built  # reused
    MemoryBackend().open_collection("p", DOCS[:-1]).bm25(["x"], 1)
    after = sorted((isolated_cache / "indexes").iterdir())
    assert len(after) == 2 and built[0] in after  # changed corpus -> a new index beside the old one


def test_top_k_dense_exact_and_stable():
    m = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32)
    (idx, sc), = top_k_dense(m, np.array([[1.0, 0.0]], dtype=np.float32), 3)
    assert idx.tolist() == [0, 2, 3]  # tie 0/2 broken by position
    assert sc.tolist() == pytest.approx([1.0, 1.0, 0.6])


@pytest.mark.slow
def test_dense_and_hybrid(isolated_cache, minilm):
    coll = MemoryBackend().open_collection("p", DOCS, minilm)
    dense = DenseRetriever(coll, minilm).retrieve("German capital city", 2)
    assert dense.ids[0] == "1"
    assert dense.scores[0] == pytest.approx(float(minilm.encode(["German capital city"])[0] @ coll.vectors()[1]), abs=1e-5)
    hyb = HybridRetriever(coll, minilm, fusion_depth=6).retrieve("Where was Emmanuel Macron born?", 3)
    assert hyb.ids[0] == "3"
    # embeddings cached by content hash: a new collection over the same docs does not re-encode
    before = minilm.stats["encoded"]
    MemoryBackend().open_collection("p", DOCS, minilm).vectors()
    assert minilm.stats["encoded"] == before


@pytest.mark.slow
def test_bm25_recall_on_bundled_sample(sample_dir):
    ds = load_dataset(sample_dir)
    assert len(ds.questions) == 100 and len(ds.passages) == 1890
    coll = MemoryBackend().open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages])
    ranks = BM25Retriever(coll).retrieve_many([q.question for q in ds.questions], 15)
    from gear_repro.evaluation.metrics import recall_at_k

    r15 = 100 * np.mean([recall_at_k(r.ids, q.gold_ids, 15) for r, q in zip(ranks, ds.questions, strict=True)])
    r5 = 100 * np.mean([recall_at_k(r.ids, q.gold_ids, 5) for r, q in zip(ranks, ds.questions, strict=True)])
    assert r5 == pytest.approx(BM25_SAMPLE_R5, abs=0.01)
    assert r15 == pytest.approx(BM25_SAMPLE_R15, abs=0.01)
    # the earlier default (stop words + Snowball stemmer) gave the README's session-21 row
    eng = MemoryBackend(bm25={"analyzer": "english"}).open_collection("passages", [IndexDoc(p.id, p.content)
                                                                                    for p in ds.passages])
    ranks = BM25Retriever(eng).retrieve_many([q.question for q in ds.questions], 15)
    assert 100 * np.mean([recall_at_k(r.ids, q.gold_ids, 15) for r, q in zip(ranks, ds.questions, strict=True)]) \
        == pytest.approx(60.75, abs=0.01)


# measured: gear-repro retriever=bm25 embedder=minilm (docs/readings.md "BM25 text analysis": ES's standard analysis,
# the default; stop words + stemmer gave 49.3333 / 60.75)
BM25_SAMPLE_R5 = 46.8333
BM25_SAMPLE_R15 = 62.0833


def test_top_k_ties_at_the_cut_go_to_the_lowest_index():
    from gear_repro.utils.arrays import top_k_row

    rng = np.random.default_rng(0)
    for _ in range(200):
        row = rng.integers(0, 4, size=30).astype(np.float32)
        k = int(rng.integers(1, 30))
        expected = sorted(range(30), key=lambda i: (-row[i], i))[:k]
        assert top_k_row(row, k).tolist() == expected


@pytest.mark.slow
def test_short_text_vectors_do_not_depend_on_the_batch(minilm):
    """encode() batches equal-length texts only: a path's vector is the same alone or among others."""
    path = "Barack Obama born in Honolulu Honolulu capital of Hawaii"
    others = ["x", "a much longer text with many more tokens than the path text has, for padding", "Hawaii state"]
    alone = minilm.encode([path])[0].copy()
    minilm.forget()
    mixed = minilm.encode(others + [path])[-1]
    assert np.array_equal(alone, mixed)
    assert not np.array_equal(alone, minilm.encode(others)[1])
