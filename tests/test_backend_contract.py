"""One contract suite for every backend (backends/base.py): memory; the noida-db ES emulator; a real
Elasticsearch cluster when ES_URL is set (skipped otherwise).

Hand-written passages and triples; the stemming and stop-word expectations (BM25_CASES) hold under both
english analyses (bm25s stop words + Snowball and ES ``english`` + Porter); the default, ES's standard analysis
(no stop words, no stemming) on both backends, has its own cases. kNN uses a fake embedder of fixed unit vectors, so the exact order is known;
one slow test repeats it with all-MiniLM-L6-v2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import bm25s
import numpy as np
import pytest

from gear_repro.backends.base import Backend, Collection, IndexDoc
from gear_repro.backends.elasticsearch import ElasticsearchBackend, ElasticsearchCollection
from gear_repro.backends.lucene_bm25 import LuceneBM25
from gear_repro.backends.memory import MemoryBackend, MemoryCollection
from gear_repro.core.triple_graph import TripleIndex, triple_docs
from gear_repro.retrieval import BM25Retriever, DenseRetriever, HybridRetriever
from gear_repro.types import Triple
from gear_repro.utils.errors import ConfigError
from tests.helpers import es_fixtures
from tests.helpers.doubles import TableEmbedder
from tests.helpers.es_fixtures import delete_prefix, gear_cache, session_prefix

noida_url = es_fixtures.noida_url  # session fixtures, registered here by name
es_real_url = es_fixtures.es_real_url

PASSAGES = [
    ("p01", "Mount Vesuvius", "Mount Vesuvius is a volcano near Naples that erupted in 79 AD and buried Pompeii."),
    ("p02", "Seine", "The Seine is a river that flows through Paris before reaching the English Channel."),
    ("p03", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, designed by Gustave Eiffel's company."),
    ("p04", "Ludwig van Beethoven", "Beethoven was a German composer whose symphonies remain widely performed."),
    ("p05", "FC Barcelona", "FC Barcelona is a football club based in Barcelona, Catalonia."),
    ("p06", "Marie Curie", "Marie Curie was a physicist and chemist who conducted pioneering research on radioactivity."),
    ("p07", "Krakatoa", "Krakatoa is a volcanic island whose eruption in 1883 was heard thousands of kilometres away."),
    ("p08", "Danube", "The Danube is the second-longest river in Europe, flowing through Vienna and Budapest."),
    ("p09", "Wolfgang Amadeus Mozart", "Mozart composed more than 800 works, including operas and symphonies, in Vienna."),
    ("p10", "Lionel Messi", "Lionel Messi played football for FC Barcelona for two decades."),
    ("p11", "Albert Einstein", "Einstein developed the theory of relativity, a pillar of modern physics."),
    ("p12", "Louvre", "The Louvre in Paris is the world's most-visited museum."),
]
PASSAGE_DOCS = [IndexDoc(i, f"{t}\n{x}") for i, t, x in PASSAGES]

TRIPLES = [
    Triple("t01", "Mount Vesuvius", "located near", "Naples", "p01"),
    Triple("t02", "Mount Vesuvius", "buried", "Pompeii", "p01"),
    Triple("t03", "Seine", "flows through", "Paris", "p02"),
    Triple("t04", "Eiffel Tower", "located in", "Paris", "p03"),
    Triple("t05", "Beethoven", "composed", "symphonies", "p04"),
    Triple("t06", "FC Barcelona", "based in", "Barcelona", "p05"),
    Triple("t07", "Danube", "flows through", "Vienna", "p08"),
    Triple("t08", "Mozart", "worked in", "Vienna", "p09"),
    Triple("t09", "Lionel  Messi", "played for", "FC Barcelona", "p10"),
    Triple("t10", "Albert Einstein", "developed", "theory of relativity", "p11"),
    Triple("t11", "Louvre", "located in", " paris", "p12"),
    Triple("t12", "Danube", "flows through", "Budapest", "p08"),
]
TRIPLE_DOCS = triple_docs(TRIPLES)

# (query, expected top ids as a set; the first len(set) hits must be exactly these)
BM25_CASES = [
    ("Which volcano buried Pompeii?", {"p01"}),
    ("river flowing through Vienna", {"p08"}),
    ("theory of relativity", {"p11"}),
    ("Who composed symphonies?", {"p04", "p09"}),
    ("erupting volcanoes", {"p01", "p07"}),  # stemming: erupted/eruption, volcano(es)
    ("football club Barcelona", {"p05"}),
]


@dataclass
class Case:
    """A backend under test plus hooks to observe index builds."""

    kind: str
    make: Callable[..., Backend]
    builds: Callable[[], int]
    index_key: Callable[[Collection], str]
    extra: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with gear_cache(tmp_path_factory.mktemp("gear_cache")) as p:
        yield p


def _es_case(kind: str, url: str) -> Iterator[Case]:
    prefix = session_prefix()
    bulk_calls = [0]
    created: list[ElasticsearchBackend] = []

    def make(**kw) -> ElasticsearchBackend:
        kw.setdefault("lookup_page", 3)   # exercise search_after paging
        kw.setdefault("lookup_batch", 2)  # and value chunking
        be = ElasticsearchBackend(url=url, index_prefix=prefix, bulk={"progress": False, "chunk_size": 5}, **kw)
        transport = be.client.transport
        orig = transport.perform_request

        def spy(method, target, *a, **k):
            if target.split("?")[0].endswith("/_bulk"):
                bulk_calls[0] += 1
            return orig(method, target, *a, **k)

        transport.perform_request = spy
        created.append(be)
        return be

    yield Case(kind, make, lambda: bulk_calls[0], lambda c: c.index)
    if created:
        delete_prefix(created[0], prefix)


@pytest.fixture(scope="module", params=["memory", pytest.param("noida", marks=pytest.mark.es),
                                        pytest.param("es", marks=pytest.mark.es)])
def case(request: pytest.FixtureRequest, module_cache: Path) -> Iterator[Case]:
    if request.param == "memory":
        calls = [0]
        mp = pytest.MonkeyPatch()
        def counting(orig):
            def count(self, *a, **k):
                calls[0] += 1
                return orig(self, *a, **k)
            return count

        mp.setattr(bm25s.BM25, "index", counting(bm25s.BM25.index))  # either BM25 index build counts
        mp.setattr(LuceneBM25, "__init__", counting(LuceneBM25.__init__))
        try:
            # the memory backend builds lazily: count a build once a query has run
            yield Case("memory", lambda **kw: MemoryBackend(**kw), lambda: calls[0],
                       lambda c: c.content_hash)
        finally:
            mp.undo()
        return
    url = request.getfixturevalue("noida_url" if request.param == "noida" else "es_real_url")
    yield from _es_case(request.param, url)


@pytest.fixture(scope="module")
def emb() -> TableEmbedder:
    return TableEmbedder(dim=8)


@pytest.fixture(scope="module")
def passages(case: Case, emb: TableEmbedder) -> Collection:
    return case.make().open_collection("passages", PASSAGE_DOCS, emb)


ENGLISH = {"analyzer": "english"}  # stop words + stemming on either backend (not the default)


@pytest.fixture(scope="module")
def english_passages(case: Case, emb: TableEmbedder) -> Collection:
    return case.make(bm25=ENGLISH).open_collection("passages", PASSAGE_DOCS, emb)


@pytest.fixture(scope="module")
def triples(case: Case, emb: TableEmbedder) -> Collection:
    return case.make().open_collection("triples", TRIPLE_DOCS, emb)


# -- shape of the contract ------------------------------------------------------------------------

def test_ids_len_protocol(passages: Collection, triples: Collection):
    assert isinstance(passages, Collection)
    assert passages.ids == [d.id for d in PASSAGE_DOCS]
    assert len(passages) == 12 and len(triples) == 12
    assert passages.name == "passages"


# -- BM25 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "expected"), BM25_CASES, ids=[q for q, _ in BM25_CASES])
def test_bm25_top_hits(english_passages: Collection, query: str, expected: set[str]):
    r = english_passages.bm25([query], 5)[0]
    assert set(r.ids[:len(expected)]) == expected, r
    assert r.scores == sorted(r.scores, reverse=True)
    assert all(s > 0 for s in r.scores)


def test_bm25_default_is_elasticsearchs_standard_analysis(passages: Collection, english_passages: Collection):
    """Both backends default to ES's standard analyzer (GEAR App. B.1): stop words are terms, nothing is stemmed."""
    assert passages.bm25(["erupting volcanoes"], 5)[0].ids == []  # neither word is in a passage unstemmed
    assert english_passages.bm25(["erupting volcanoes"], 5)[0].ids[:2] in (["p01", "p07"], ["p07", "p01"])
    assert set(passages.bm25(["symphonies"], 5)[0].ids) == {"p04", "p09"}  # the exact word still matches
    the = passages.bm25(["the of and"], 12)[0]
    assert {"p02", "p03", "p08", "p11", "p12"} <= set(the.ids)  # "the"/"of" are indexed terms
    assert english_passages.bm25(["the of and"], 5)[0].ids == []


def test_bm25_batch_equals_single(passages: Collection):
    qs = [q for q, _ in BM25_CASES]
    batch = passages.bm25(qs, 4)
    assert len(batch) == len(qs)
    for q, r in zip(qs, batch, strict=True):
        single = passages.bm25([q], 4)[0]
        assert r.ids == single.ids
        assert r.scores == pytest.approx(single.scores)


def test_bm25_k_larger_than_collection(passages: Collection):
    r = passages.bm25(["Paris"], 100)[0]
    assert set(r.ids) == {"p02", "p03", "p12"}  # only matching docs
    assert len(passages.bm25(["river Paris museum volcano football physics"], 1000)[0]) <= len(passages)


@pytest.mark.parametrize("query", ["", "   ", "xylophone"])
def test_bm25_no_indexable_token_gives_empty(passages: Collection, query: str):
    r = passages.bm25([query, "Pompeii"], 5)
    assert r[0].ids == [] and r[0].scores == []
    assert r[1].ids[0] == "p01"


def test_bm25_k_zero_and_no_queries(passages: Collection):
    assert [x.ids for x in passages.bm25(["Paris"], 0)] == [[]]
    assert passages.bm25([], 5) == []


def test_bm25_ties_break_by_position(case: Case):
    docs = [IndexDoc(f"d{i}", "identical twin text") for i in (3, 1, 2, 0)]
    coll = case.make().open_collection("ties", docs, None)
    assert coll.bm25(["twin"], 3)[0].ids == ["d3", "d1", "d2"]


# -- kNN / vectors --------------------------------------------------------------------------------

def test_knn_exact_order_and_cosine(passages: Collection, emb: TableEmbedder):
    matrix = emb.encode([d.text for d in PASSAGE_DOCS])
    queries = emb.encode(["volcano", "a question about rivers", PASSAGE_DOCS[4].text])
    for q, r in zip(queries, passages.knn(queries, 5), strict=True):
        sims = matrix @ q
        order = np.argsort(-sims, kind="stable")[:5]
        assert r.ids == [PASSAGE_DOCS[i].id for i in order]
        assert r.scores == pytest.approx(sims[order].tolist(), abs=1e-4)
    assert passages.knn(queries[2:], 1)[0].ids == ["p05"]  # the document's own vector


def test_knn_k_larger_than_collection(passages: Collection, emb: TableEmbedder):
    r = passages.knn(emb.encode(["anything"]), 50)[0]
    assert sorted(r.ids) == sorted(passages.ids)
    assert r.scores == sorted(r.scores, reverse=True)
    assert passages.knn(emb.encode(["x"]), 0)[0].ids == []


def test_vectors_aligned_with_ids(passages: Collection, emb: TableEmbedder):
    v = passages.vectors()
    assert v.shape == (12, emb.dim) and v.dtype == np.float32
    np.testing.assert_allclose(v, emb.encode([d.text for d in PASSAGE_DOCS]), atol=1e-6)


def test_no_embedder_means_no_dense(case: Case):
    coll = case.make().open_collection("sparse_only", PASSAGE_DOCS[:4], None)
    assert coll.bm25(["Pompeii"], 2)[0].ids == ["p01"]
    with pytest.raises(ConfigError, match="without an embedder"):
        coll.knn(np.ones((1, 8), np.float32), 2)
    with pytest.raises(ConfigError, match="without an embedder"):
        coll.vectors()


# -- keyword lookups ------------------------------------------------------------------------------

def test_lookup_keyword_fields(triples: Collection):
    got = triples.lookup("object_key", ["paris", "vienna", "nobody", "paris"])
    assert got == {"paris": ["t03", "t04", "t11"], "vienna": ["t07", "t08"], "nobody": []}
    assert triples.lookup("subject_key", ["danube", "lionel messi"]) == {"danube": ["t07", "t12"],
                                                                         "lionel messi": ["t09"]}
    assert triples.lookup("passage_id", ["p08", "p01", "p06"]) == {"p08": ["t07", "t12"], "p01": ["t01", "t02"],
                                                                   "p06": []}
    assert triples.lookup("subject_key", ["Danube"]) == {"Danube": []}  # exact match on the normalised key
    assert triples.lookup("no_such_field", ["x"]) == {"x": []}
    assert triples.lookup("subject_key", []) == {}


def test_lookup_many_values_pages(triples: Collection):
    keys = sorted({d.fields["passage_id"] for d in TRIPLE_DOCS})
    got = triples.lookup("passage_id", keys + ["p99"])
    expect: dict[str, list[str]] = {}
    for d in TRIPLE_DOCS:
        expect.setdefault(d.fields["passage_id"], []).append(d.id)
    assert got == {**expect, "p99": []}


def test_triple_index_lookup_adjacency_matches_records(triples: Collection):
    by_records = TripleIndex(triples, TRIPLES, adjacency="records")
    by_lookup = TripleIndex(triples, TRIPLES, adjacency="lookup")
    for t in TRIPLES:
        assert by_lookup.neighbours(t.id) == by_records.neighbours(t.id), t.id
    assert set(by_lookup.neighbours("t03")) == {"t04", "t11"}  # " paris" == "Paris" after normalisation


# -- retrievers run unchanged ---------------------------------------------------------------------

def test_retrievers_run_unchanged(passages: Collection, triples: Collection, emb: TableEmbedder):
    assert BM25Retriever(passages).retrieve("Which volcano buried Pompeii?", 3).ids[0] == "p01"
    q = PASSAGE_DOCS[7].text
    assert DenseRetriever(passages, emb).retrieve(q, 3).ids[0] == "p08"
    hyb = HybridRetriever(passages, emb, fusion_depth=12).retrieve_many([q, "theory of relativity"], 3)
    assert hyb[0].ids[0] == "p08" and "p11" in hyb[1].ids
    idx = TripleIndex(triples, TRIPLES)
    assert idx.triple_link(("Seine", "flows through", "Paris"), BM25Retriever(triples)) == "t03"


# -- idempotent, content-stamped builds -----------------------------------------------------------

def test_reopen_reuses_index(case: Case, emb: TableEmbedder):
    docs = PASSAGE_DOCS[:6]
    first = case.make().open_collection("reopen", docs, emb)
    r1 = first.bm25(["Paris river"], 3)
    built = case.builds()
    again = case.make().open_collection("reopen", docs, emb)
    r2 = again.bm25(["Paris river"], 3)
    assert case.builds() == built, "re-open rebuilt the index"
    assert case.index_key(again) == case.index_key(first)
    assert r2.__repr__() == r1.__repr__()
    if isinstance(again, ElasticsearchCollection):
        assert again.reused and not first.reused


def test_changed_docs_build_a_new_index(case: Case, emb: TableEmbedder):
    docs = PASSAGE_DOCS[:6]
    base = case.make().open_collection("changes", docs, emb)
    base.bm25(["x"], 1)
    built = case.builds()
    changed = [*docs[:5], IndexDoc(docs[5].id, "Marie Curie\nA zeppelin hangar.")]
    new = case.make().open_collection("changes", changed, emb)
    assert new.bm25(["zeppelin"], 3)[0].ids == ["p06"]
    assert case.builds() > built
    assert case.index_key(new) != case.index_key(base)
    assert base.bm25(["zeppelin"], 3)[0].ids == []  # the old index is untouched
    if isinstance(new, ElasticsearchCollection):  # the embedder model is part of the stamp too
        other = case.make().open_collection("changes", changed, TableEmbedder(dim=8, model_id="table-v2"))
        assert other.index != new.index


# -- a real embedder ------------------------------------------------------------------------------

@pytest.mark.slow
def test_knn_with_minilm(case: Case, module_cache: Path):
    from gear_repro.embedding import SentenceEmbedder

    minilm = SentenceEmbedder("all-MiniLM-L6-v2", show_progress=False)
    coll = case.make().open_collection("minilm", PASSAGE_DOCS, minilm)
    qs = ["Which mountain destroyed a Roman town?", "famous classical composers", "who studied radioactive elements"]
    res = coll.knn(minilm.encode(qs), 3)
    assert res[0].ids[0] == "p01"
    assert set(res[1].ids[:2]) == {"p04", "p09"}
    assert res[2].ids[0] == "p06"
    exact = MemoryCollection("ref", PASSAGE_DOCS, minilm).knn(minilm.encode(qs), 3)
    for a, b in zip(res, exact, strict=True):
        assert a.ids == b.ids
        assert a.scores == pytest.approx(b.scores, abs=1e-4)
