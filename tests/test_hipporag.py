"""HippoRAG baseline: PPR (hand-computed, networkx cross-check), graph construction (relation and synonym edges,
node specificity, passage matrix, cache), NER reply parsing, v1/v2 retrieval with a scripted LLM, and the real
LLM path once with the tiny model."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gear_repro.config import group_config
from gear_repro.llm.ledger import tags
from gear_repro.llm.parsing import parse_named_entities
from gear_repro.methods.hipporag.phrase_graph import (
    PhraseGraph,
    alnum_length,
    build_phrase_graph,
    cached_phrase_graph,
    phrase_key,
    synonym_pairs,
)
from gear_repro.methods.hipporag.retriever import HippoRAG
from gear_repro.types import Passage, Question, Triple
from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS, TOY_TRIPLES
from tests.helpers.doubles import FixedRetriever, ScriptedLLM, TableEmbedder
from tests.helpers.requirements import missing, require_module

require_module("igraph", "make test-deps")


def graph_of(n: int, edges: list[tuple[int, int, float]]) -> PhraseGraph:
    import scipy.sparse as sp

    return PhraseGraph(phrases=[f"p{i}" for i in range(n)], passage_ids=[], edges=np.array([e[:2] for e in edges]),
                       weights=np.array([e[2] for e in edges], dtype=float), passage_phrase=sp.csr_matrix((0, n)))


# -- PPR ------------------------------------------------------------------------------------------------------
def test_ppr_on_a_hand_computed_star() -> None:
    # a-b (1), a-c (3); reset on b; damping 0.5:
    # pi_b = .5 + .5 * pi_a/4, pi_c = .5 * 3 pi_a/4, pi_a = .5 (pi_b + pi_c)  ->  (1/3, 13/24, 1/8)
    g = graph_of(3, [(0, 1, 1.0), (0, 2, 3.0)])
    pr = g.personalized_pagerank(np.array([0.0, 1.0, 0.0]), damping=0.5)
    assert pr == pytest.approx([1 / 3, 13 / 24, 1 / 8], abs=1e-9)


def test_ppr_matches_networkx_on_a_random_weighted_graph() -> None:
    nx = require_module("networkx", "make test-deps")
    rng = np.random.default_rng(7)
    n = 40
    pairs = {(i, i + 1) for i in range(n - 1)}  # connected
    while len(pairs) < 120:
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        pairs.add((a, b))
    edges = [(a, b, float(rng.uniform(0.1, 5.0))) for a, b in sorted(pairs)]
    reset = np.zeros(n)
    reset[rng.choice(n, 4, replace=False)] = rng.uniform(0.1, 1.0, 4)
    ours = graph_of(n, edges).personalized_pagerank(reset, damping=0.5)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from(edges)
    ref = nx.pagerank(G, alpha=0.5, personalization={i: float(reset[i]) for i in range(n)}, weight="weight",
                      tol=1e-12, max_iter=1000)
    assert ours == pytest.approx([ref[i] for i in range(n)], abs=1e-8)
    assert int(np.argmax(ours)) == max(ref, key=ref.get)


def test_ppr_rejects_an_empty_reset() -> None:
    with pytest.raises(ValueError, match="all zero"):
        graph_of(2, [(0, 1, 1.0)]).personalized_pagerank(np.zeros(2))


# -- graph construction --------------------------------------------------------------------------------------
def T(i: int, s: str, p: str, o: str, pid: str) -> Triple:
    return Triple(f"t{i}", s, p, o, pid)


TOY_GRAPH_TRIPLES = [
    T(0, "Barack Obama", "born in", "Honolulu", "d0"),
    T(1, "Obama", "president of", "U.S.", "d1"),
    T(2, "Barack Obama", "born in", "Honolulu", "d1"),
    T(3, "barack  obama!", "born in", "Honolulu", "d1"),  # same fact after normalisation: counted once per passage
    T(4, "Honolulu", "located in", "Hawaii", "d2"),
]
VECS = {  # unit vectors: obama ~ barack obama (cos 0.96), hawaii ~ u s (0.9, but "u s" has only 2 alphanumerics)
    "barack obama": [1.0, 0.0, 0.0], "obama": [0.96, 0.28, 0.0], "honolulu": [0.0, 1.0, 0.0],
    "u s": [0.0, 0.0, 1.0], "hawaii": [0.0, 0.43588989, 0.9],
}


def fake_embed(texts: list[str]) -> np.ndarray:
    v = np.array([VECS[t] for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_phrase_key_follows_processing_phrases() -> None:
    assert phrase_key("Barack  Obama!") == "barack obama"
    assert phrase_key("U.S.") == "u s"
    assert phrase_key("U.S.", "entity") == "u.s."


def test_relation_and_synonym_edges_and_node_specificity() -> None:
    g = build_phrase_graph(TOY_GRAPH_TRIPLES, ["d0", "d1", "d2", "d3"], fake_embed)
    assert g.phrases == ["barack obama", "hawaii", "honolulu", "obama", "u s"]
    w = {(g.phrases[a], g.phrases[b]): float(x) for (a, b), x in zip(g.edges.tolist(), g.weights, strict=True)}
    # relation edges: count of triples per pair, stored in both directions (3 triples barack obama-honolulu)
    assert w[("barack obama", "honolulu")] == pytest.approx(6.0)
    assert w[("hawaii", "honolulu")] == pytest.approx(2.0)
    # obama-u s: relation (1+1), no synonym: cos 0 (and "u s" has 2 alphanumerics)
    assert w[("obama", "u s")] == pytest.approx(2.0)
    # synonym barack obama <-> obama: cos 0.96 in both directions
    assert w[("barack obama", "obama")] == pytest.approx(2 * 0.96, abs=1e-5)
    # hawaii -> u s is a synonym (cos 0.9, hawaii has 6 alphanumerics) but u s -> hawaii is not: one direction
    assert w[("hawaii", "u s")] == pytest.approx(0.9, abs=1e-5)
    assert g.stats["synonym_entries"] == 3 and len(w) == 5
    # reported in run.json: undirected synonym edges, and phrases touching one (4 of 5: not honolulu)
    assert g.stats["synonym_edges"] == 2 and g.stats["phrases_with_synonym"] == 4
    assert g.stats["synonym_phrase_share"] == pytest.approx(0.8)
    # node specificity |P_i|: passages containing the phrase
    spec = dict(zip(g.phrases, g.node_specificity_counts().tolist(), strict=True))
    assert spec == {"barack obama": 2, "hawaii": 1, "honolulu": 3, "obama": 1, "u s": 1}
    # passage x phrase: distinct facts of the passage containing the phrase (d1's duplicate counted once)
    m = g.passage_phrase.toarray()
    assert m[1, g.phrase_index["barack obama"]] == 1 and m[1, g.phrase_index["honolulu"]] == 1
    assert m[3].sum() == 0  # a passage without triples


def test_synonym_search_in_blocks_equals_one_block() -> None:
    rng = np.random.default_rng(3)
    v = rng.normal(size=(50, 8)).astype(np.float32)
    v[10:20] = v[0] + 0.05 * rng.normal(size=(10, 8))  # a cluster of near-duplicates
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    whole = synonym_pairs(v, 0.8, top_k=4)
    blocks = synonym_pairs(v, 0.8, top_k=4, block_rows=3)  # BLAS may round the last float32 bit differently
    assert [p[:2] for p in whole] == [p[:2] for p in blocks]
    assert [p[2] for p in whole] == pytest.approx([p[2] for p in blocks], abs=1e-6)
    assert whole and all(s >= 0.8 and i != j for i, j, s in whole)
    per_row: dict[int, list[float]] = {}
    for i, _, s in whole:
        per_row.setdefault(i, []).append(s)
    assert max(len(x) for x in per_row.values()) == 4
    assert all(x == sorted(x, reverse=True) for x in per_row.values())


def test_graph_cache_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    args = (TOY_GRAPH_TRIPLES[:2], ["d0", "d1"], None, {"synonyms": False, "version": "v2"}, "none")
    g1 = cached_phrase_graph(*args)
    g2 = cached_phrase_graph(*args)
    assert g1.stats["cached"] is False and g2.stats["cached"] is True
    assert g2.phrases == g1.phrases and g2.version == "v2" and g2.n_nodes == 4 + 2
    assert np.array_equal(g2.edges, g1.edges) and np.allclose(g2.weights, g1.weights)
    assert (g2.passage_phrase != g1.passage_phrase).nnz == 0
    assert len(list((tmp_path / "hipporag").glob("graph-*.npz"))) == 1


def test_graph_saves_names_as_utf8_and_reads_earlier_unicode_arrays(tmp_path) -> None:
    """Names are stored as UTF-8 bytes with end offsets (a fixed-width unicode array took 6.2 GiB at 2Wiki size);
    a graph saved with the earlier unicode arrays still loads to the same graph."""
    from tests.helpers.graph_formats import save_unicode

    triples = [T(0, "naïve café", "in", "北京", "p\u00e9\n1"), T(1, "x" * 300, "is", "y", "p2")]
    g = build_phrase_graph(triples, ["p\u00e9\n1", "p2", ""], None, synonyms=False, normalisation="entity")
    assert "北京" in g.phrases and any(len(p) == 300 for p in g.phrases)
    g.save(tmp_path / "new.npz")
    with np.load(tmp_path / "new.npz") as z:
        assert "phrases" not in z and z["phrases_utf8"].dtype == np.uint8
        assert z["phrases_utf8"].nbytes == sum(len(p.encode("utf-8")) for p in g.phrases)
    save_unicode(g, tmp_path / "old.npz")
    m = g.passage_phrase
    for name in ("new.npz", "old.npz"):
        h = PhraseGraph.load(tmp_path / name)
        assert h.phrases == g.phrases and h.passage_ids == ["p\u00e9\n1", "p2", ""]
        assert np.array_equal(h.edges, g.edges) and (h.passage_phrase != m).nnz == 0 and h.stats == g.stats
    empty = graph_of(0, [])
    empty.edges = np.zeros((0, 2), np.int64)
    empty.save(tmp_path / "empty.npz")
    assert PhraseGraph.load(tmp_path / "empty.npz").phrases == []


# -- NER reply parsing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "entities", "failed"), [
    ('{"named_entities": ["First for Women", "Arthur\'s Magazine"]}', ["First for Women", "Arthur's Magazine"], False),
    ('```json\n{"named_entities": ["Amiens", "France"]}\n```', ["Amiens", "France"], False),
    ('Sure! {"named_entities": ["Emmanuel Macron", "Fra', ["Emmanuel Macron", "Fra"], False),  # truncated
    ("", [], True),
    ("   ", [], True),
    ("I cannot find entities.", [], True),
    ('{"named_entities": []}', [], False),
])
def test_ner_reply_parsing(reply: str, entities: list[str], failed: bool) -> None:
    got = parse_named_entities(reply)
    assert got.entities == entities and got.failed is failed


# -- retrieval -----------------------------------------------------------------------------------------------
def toy_resources(ner_reply: str, embedder=None, **extra):
    passages = [Passage(str(i), t, x) for i, (t, x) in enumerate(TOY_PASSAGES)]
    triples = [Triple(f"{p}-{i}", s, r, o, p) for i, (s, r, o, p) in enumerate(TOY_TRIPLES)]
    ds = SimpleNamespace(passages=passages, triples=triples, questions=[Question(**q) for q in TOY_QUESTIONS],
                         passage_by_id={p.id: p for p in passages})
    return SimpleNamespace(dataset=ds, embedder=embedder or TableEmbedder(16, key=phrase_key), llm=ScriptedLLM({"ner": ner_reply}),
                           passage_retriever=FixedRetriever(["5", "4"]), **extra)


def hippo(res, **settings) -> HippoRAG:
    """HippoRAG over the toy resources (what the wiring hands over; collections only where given)."""
    return HippoRAG(res.dataset.passages, res.dataset.triples, res.embedder, llm=res.llm,
                    fallback_retriever=res.passage_retriever, passage_collection=getattr(res, "passages", None),
                    triple_collection=getattr(res, "triples", None), **settings)


def test_v1_links_entities_and_ranks_by_ppr() -> None:
    res = toy_resources('{"named_entities": ["France", "Emmanuel Macron"]}')
    h = hippo(res, cache=False, synonyms=False)
    with tags(round=2):  # the caller's round (IRCoT's loop) reaches the NER call
        out = h.search("Where was the president of France born?", 6)
    assert out.trace["entities"] == ["france", "emmanuel macron"]
    assert [x[:2] for x in out.trace["linked"]] == [["france", "france"], ["emmanuel macron", "emmanuel macron"]]
    assert out.trace["ppr_ms"] >= 0 and "fallback" not in out.trace
    r = out.ranking
    assert len(r) == 6 and r.scores[0] == pytest.approx(1.0) and min(r.scores) == pytest.approx(0.0)
    # passage 2 holds the fact linking both seeds; Paris (0) and Amiens (3) hold one seed each
    assert r.ids[0] == "2" and set(r.ids[1:3]) == {"0", "3"}
    assert r.scores == sorted(r.scores, reverse=True)
    assert res.llm.stages() == [("ner", 2)]
    assert "Question: Where was the president of France born?" in res.llm.calls[0]["prompt"]
    # the specificity-weighted reset is what PPR sees: both seeds occur in 2 passages -> weight 1/2 each
    assert h.specificity[h.graph.phrase_index["france"]] == pytest.approx(0.5)


def test_cached_phrase_vectors_are_a_map_with_the_values_and_rankings_of_an_uncached_run(tmp_path, monkeypatch) -> None:
    """A SentenceEmbedder's phrase vectors are the cache file's read-only memory map, not a copy in memory (4.8M
    phrases at 2Wiki's size are 6.9 GiB of float32, docs/scale.md): the same vectors, links and ranking."""
    from tests.helpers.doubles import HashEmbedder

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    on, off = HashEmbedder(), HashEmbedder()
    off.cache = False
    question = "Where was the president of France born?"
    out = {}
    for name, emb in (("mapped", on), ("again", on), ("loaded", off)):
        h = hippo(toy_resources('{"named_entities": ["France", "Emmanuel Macron"]}', embedder=emb), cache=False,
                  synonym_threshold=0.0)  # hash vectors: distinct words are orthogonal
        out[name] = (h.phrase_vectors, h.graph.edges, h.search(question, 6))
    loaded = out["loaded"][0]
    assert isinstance(loaded, np.ndarray) and not isinstance(loaded.base, np.memmap)
    for name in ("mapped", "again"):
        vecs, edges, res = out[name]
        assert isinstance(vecs.base, np.memmap) and not vecs.flags.writeable and np.array_equal(vecs, loaded)
        assert np.array_equal(edges, out["loaded"][1])
        assert res.ranking == out["loaded"][2].ranking and res.trace["linked"] == out["loaded"][2].trace["linked"]
    assert len(out["loaded"][1]) > len(TOY_TRIPLES)  # synonym edges too, found on the mapped vectors


def test_query_entities_come_from_the_runs_llm_for_every_query_as_the_reading_says() -> None:
    """HippoRAG legacy takes a question's entities from its NER file before asking the LLM (hipporag.py:85-94,
    302-306); the harness reads no such file: every search, a repeated question too, asks the run's LLM, and
    docs/readings.md says so where it names that difference."""
    row = next(line for line in (Path(__file__).parent.parent / "docs" / "readings.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("| HippoRAG v1 | query NER source |"))
    assert "src/hipporag.py:85-94" in row and "302-303" in row and "`HippoRAG.ner`" in row
    res = toy_resources('{"named_entities": ["France"]}')
    h = hippo(res, cache=False, synonyms=False)
    question = res.dataset.questions[0].question
    first, again = h.search(question, 3), h.search(question, 3)
    assert [s for s, _ in res.llm.stages()] == ["ner", "ner"]
    assert all(f"Question: {question}" in c["prompt"] for c in res.llm.calls)
    assert first.trace["ner"]["reply"] == again.trace["ner"]["reply"] == '{"named_entities": ["France"]}'


def test_v1_passages_out_of_reach_tie_in_descending_corpus_order() -> None:
    # Berlin's component holds passage 1 alone: the other five score 0 and come as hipporag.py:264's
    # argsort(kind='mergesort')[::-1] lists them (tie_order=reference, the default), or in corpus order
    res = toy_resources('{"named_entities": ["Berlin"]}')
    ref = hippo(res, cache=False, synonyms=False).search("What is the capital of Germany?", 6).ranking
    assert ref.ids == ["1", "5", "4", "3", "2", "0"] and ref.scores[1:] == [0.0] * 5
    corpus = hippo(res, cache=False, synonyms=False, tie_order="corpus").search("What is the capital of Germany?", 6)
    assert corpus.ranking.ids == ["1", "0", "2", "3", "4", "5"]


@pytest.mark.parametrize("reply", ["", "no entities here", '{"named_entities": ["!!"]}'])
def test_v1_falls_back_when_no_entity(reply: str) -> None:
    # default = the v1 code: uniform 1/N scores (hipporag.py:232-233), ties in descending corpus order (:264)
    uni = hippo(toy_resources(reply), cache=False, synonyms=False).search("q?", 3)
    assert uni.ranking.ids == ["5", "4", "3"] and uni.ranking.scores == pytest.approx([1 / 6] * 3)
    assert uni.trace["fallback"] == "uniform"
    assert uni.trace["counters"] == {"hipporag_searches": 1, "hipporag_no_entity": 1,
                                     "hipporag_ner_failed": int(reply != '{"named_entities": ["!!"]}'),
                                     "hipporag_ner_repaired": 0}
    res = toy_resources(reply)
    out = hippo(res, cache=False, synonyms=False, no_entity_fallback="retriever").search("q?", 2)
    assert out.trace["fallback"] == "retriever" and out.ranking.ids == ["5", "4"]
    assert res.passage_retriever.queries == ["q?"]


def test_fallback_rate_in_metrics() -> None:
    from gear_repro.evaluation.aggregate import aggregate

    found = hippo(toy_resources('{"named_entities": ["France"]}'), cache=False, synonyms=False).search("q?", 3)
    assert found.trace["counters"] == {"hipporag_searches": 1, "hipporag_no_entity": 0, "hipporag_ner_failed": 0,
                                       "hipporag_ner_repaired": 0}
    failed = hippo(toy_resources("no entities here"), cache=False, synonyms=False).search("q?", 3)
    preds = [{"id": str(i), "gold_ids": ["0"], "rankings": {"final": ["0"]}, "trace": t}
             for i, t in enumerate([found.trace, found.trace, failed.trace, {"counters": {"hipporag_searches": 2,
                                                                                         "hipporag_no_entity": 1}}])]
    stats = aggregate(preds, [5])["agent_stats"]
    assert stats["hipporag_searches"] == 5 and stats["hipporag_no_entity"] == 2 and stats["hipporag_ner_failed"] == 1
    assert stats["hipporag_no_entity_rate"] == pytest.approx(0.4)
    assert stats["hipporag_ner_failed_rate"] == pytest.approx(0.2)


def test_synonym_encoder_is_an_explicit_value(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    res = toy_resources('{"named_entities": ["France"]}')
    own = hippo(res, synonym_threshold=0.85)
    assert own.encoder is res.embedder and own.describe()["encoder"] == "table"
    assert own.describe()["synonym_threshold"] == 0.85 and "synonym_phrase_share" in own.describe()["graph"]
    other = TableEmbedder(8, key=phrase_key, model_id="other")
    h = hippo(toy_resources('{"named_entities": ["France"]}'), encoder=other)
    assert h.encoder is other and h.describe()["encoder"] == "other"
    assert h.phrase_vectors.shape[1] == 8  # phrases and linked entities use the synonym encoder
    assert h.search("q?", 3).trace["linked"][0][:2] == ["france", "france"]
    assert len(list((tmp_path / "hipporag").glob("graph-*.npz"))) == 2  # the encoder is part of the cache key


@pytest.mark.parametrize("dtype", ["float32", "float16"])  # backend.dense_dtype: the collections' vectors
def test_v2_seeds_facts_and_passage_nodes(dtype: str) -> None:
    base = toy_resources("")
    emb = base.embedder
    triples = SimpleNamespace(ids=[t.id for t in base.dataset.triples],
                              vectors=lambda: emb.encode([t.text for t in base.dataset.triples]).astype(dtype))
    passages = SimpleNamespace(vectors=lambda: emb.encode([p.content for p in base.dataset.passages]).astype(dtype))
    res = toy_resources("", triples=triples, passages=passages)
    h = hippo(res, version="v2", cache=False, synonyms=False, linking_top_k=1, passage_node_weight=0.0)
    query = "Emmanuel Macron born in Amiens"  # equals the text of triple 3 -> that fact scores 1.0
    out = h.search(query, 6)
    assert out.trace["facts"] == [["3-3", 1.0]]
    # subject and object both weigh 1.0 / 2 passages; the tie keeps the first phrase in sorted order
    assert out.trace["seeds"] == [["amiens", 0.5]]
    # the passage nodes next to "amiens" come first
    assert set(out.ranking.ids[:2]) == {"3", "4"} and len(out.ranking) == 6
    assert h.graph.n_nodes == h.graph.n_phrases + 6 and res.llm.calls == []  # v2 needs no NER call


# -- the real LLM path, once ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_hipporag_ner_through_the_tiny_model(tmp_path: Path) -> None:
    from hydra.utils import instantiate

    from gear_repro.llm.gguf_weights import smollm2_path

    try:
        smollm2_path()
    except Exception as e:
        missing(f"tiny model not installed: {e}")
    cfg = group_config("llm", "tiny")
    cfg.cache_dir = str(tmp_path / "cache")
    client = instantiate(cfg)
    res = toy_resources("")
    res.llm = client
    try:
        out = hippo(res, cache=False, synonyms=False).search("Where was the president of France born?", 6)
    finally:
        client.close()
    recs = client.ledger.since(0)
    assert [(r["stage"], r["round"], r["ok"]) for r in recs] == [("ner", 0, True)]
    assert recs[0]["prompt_tokens"] > 50
    assert isinstance(out.trace["ner"]["reply"], str)
    assert len(out.ranking) in (2, 6)  # ranked by PPR, or the fallback's 2 passages when the reply has no entity


def test_hipporag_through_the_runner(toy_dir, tmp_path, compose, monkeypatch) -> None:
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.reporting.runs import find_runs
    from gear_repro.utils.io import read_jsonl

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    cfg = validate(compose(["agent=hipporag", "retriever=bm25", f"dataset.path={toy_dir}", "dataset.name=toy",
                            "run.progress=false", "hipporag.synonyms=false"]))
    res = Resources(cfg, embedder=TableEmbedder(16, key=phrase_key),
                    llm=ScriptedLLM({"ner": '```json\n{"named_entities": ["France", "Emmanuel Macron"]}\n```'}))
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    assert metrics["n_errors"] == 0 and metrics["recall@5"] == pytest.approx(200 / 3)  # Berlin (q2) is cut off from the seeds
    preds = read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert [c["stage"] for c in preds[0]["llm_calls"]] == ["ner"] and preds[0]["llm_calls"][0]["round"] == 1
    assert preds[0]["trace"]["entities"] == ["france", "emmanuel macron"] and preds[0]["rankings"]["final"][0] == "2"
    run = find_runs([tmp_path / "run"])[0]
    assert run.method_label == "HippoRAG (no synonym edges)"  # the toy run turns them off
    assert run.method.startswith("HippoRAG (no synonym edges; ") and "LLM " in run.method  # not the paper's LLM
    assert "version: v1" in (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8")
    assert len(list((tmp_path / "cache" / "hipporag").glob("graph-*.npz"))) == 1


def test_a_graph_that_would_not_fit_stops_the_run_before_its_questions(toy_dir, tmp_path, compose,
                                                                        monkeypatch) -> None:
    """The graph build's memory check (after the phrase encode, before the synonym search) stops the run with
    failure.json saying why; no question is scored (the graph is built with the run's provenance, before them)."""
    from gear_repro.config import validate
    from gear_repro.pipeline import capacity
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils import memory
    from gear_repro.utils.errors import CapacityError

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(capacity, "check", lambda est, **free: None)  # the start-up check passes
    monkeypatch.setattr(memory, "run_memory", lambda: 0)
    cfg = validate(compose(["agent=hipporag", "retriever=bm25", f"dataset.path={toy_dir}", "dataset.name=toy",
                            "run.progress=false"]))
    embedder = TableEmbedder(16, key=phrase_key)
    res = Resources(cfg, embedder=embedder, llm=ScriptedLLM({"ner": '{"named_entities": ["France"]}'}))
    with pytest.raises(CapacityError, match="HippoRAG's phrase graph"):
        Runner(cfg, tmp_path / "run", resources=res).run()
    failure = json.loads((tmp_path / "run" / "failure.json").read_text(encoding="utf-8"))
    assert failure["error"].startswith("CapacityError: not enough memory to go on: HippoRAG's phrase graph (")
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert not (tmp_path / "run" / "predictions.jsonl").exists() or not (tmp_path / "run" / "predictions.jsonl").read_text()
    # the check follows run.capacity_check: off, the same run builds its graph and finishes
    off = validate(compose(["agent=hipporag", "retriever=bm25", f"dataset.path={toy_dir}", "dataset.name=toy",
                            "run.progress=false", "run.capacity_check=false"]))
    res = Resources(off, embedder=embedder, llm=ScriptedLLM({"ner": '{"named_entities": ["France"]}'}))
    assert Runner(off, tmp_path / "run2", resources=res).run()["n_errors"] == 0


@pytest.mark.slow
def test_synonym_threshold_benchmark_with_cached_ner(toy_dir, tmp_path, monkeypatch) -> None:
    import json

    from benchmarks.bench_hipporag_synonyms import main
    from gear_repro.utils.io import read_jsonl

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    ner = tmp_path / "ner.jsonl"
    ner.write_text(json.dumps({"question": TOY_QUESTIONS[0]["question"], "named_entities": ["France"]}) + "\n",
                   encoding="utf-8")
    rows = main(["--ner", str(ner), "--thresholds", "0.8", "0.9", "--out", str(tmp_path / "out.json"),
                 "--run-root", str(tmp_path / "runs"), "--", f"dataset.path={toy_dir}", "dataset.name=toy",
                 "retriever=bm25", "embedder.show_progress=false"])
    assert [(r["threshold"], r["fallback"]) for r in rows] == [(0.8, "uniform"), (0.8, "retriever"),
                                                               (0.9, "uniform"), (0.9, "retriever")]
    assert rows[0]["n_questions"] == 3 and rows[0]["no_entity_rate"] == pytest.approx(2 / 3)  # q2, q3: no NER
    assert rows[0]["synonym_edges"] >= rows[2]["synonym_edges"] and 0 <= rows[2]["synonym_phrase_share"] <= 1
    assert rows[1]["synonym_edges"] == rows[0]["synonym_edges"]  # the fallback does not touch the graph
    # q2 has no entity: v1's uniform scores rank in reverse corpus order, the BM25 fallback by the question's words
    q2 = {fb: next(r for r in read_jsonl(tmp_path / "runs" / f"threshold_0.8_{fb}" / "predictions.jsonl")
                   if r["id"] == "q2")["rankings"]["final"][:2] for fb in ("uniform", "retriever")}
    assert q2 == {"uniform": ["5", "4"], "retriever": ["1", "0"]}
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["ner"] == str(ner)


def test_ner_failures_reach_the_report_table_and_the_run_warning(capsys) -> None:
    """A query-NER reply that does not parse falls back (uniform) and is counted: the report's hipporag_stats row
    and the warning the run command prints after the run both say so (not only the no-entity rate)."""
    from gear_repro.cli.run import _warn_reply_failures
    from gear_repro.evaluation.aggregate import agent_stats
    from gear_repro.methods.hipporag.report import summary_row

    traces = [hippo(toy_resources(reply), cache=False, synonyms=False).search("q?", 3).trace
              for reply in ("not json", '{"named_entities": ["France"]}', "")]
    preds = [{"id": str(i), "gold_ids": ["0"], "rankings": {"final": ["0"]}, "trace": t} for i, t in enumerate(traces)]
    assert summary_row(preds) == {"hipporag_searches": 3, "hipporag_ner_failed": 2, "hipporag_ner_repaired": 0,
                                  "hipporag_no_entity": 2, "ner_failed_rate": 0.6667, "no_entity_rate": 0.6667}
    assert summary_row([{"id": "x", "trace": {}}]) is None
    _warn_reply_failures(agent_stats(preds))
    err = capsys.readouterr().err
    assert err.startswith("WARNING: LLM replies that did not parse") and "hipporag_ner_failed=2" in err
    _warn_reply_failures(agent_stats(preds[1:2]))
    assert capsys.readouterr().err == ""


# -- the query NER's JSON mode (HippoRAG legacy src/named_entity_extraction_parallel.py:47-55) ---------------------
NER_REPLY = '{"named_entities": ["France", "Emmanuel Macron"]}'


def test_ner_json_mode_is_on_for_an_api_llm_and_off_for_the_local_server() -> None:
    """The reference asks its OpenAI client for response_format json_object (:47-51) and its local llama.cpp /
    Ollama clients for none (:52-55); we sent plain chat to every LLM."""
    res = toy_resources(NER_REPLY)  # a client whose server the harness does not start: an API model
    h = hippo(res, cache=False, synonyms=False, ner_params={"max_tokens": 300, "stop": ["\n\n"]})
    h.search("Where was the president of France born?", 6)
    assert h.ner_json is True
    assert res.llm.calls[0]["params"] == {"max_tokens": 300, "stop": ["\n\n"], "response_format": {"type": "json_object"}}
    local = toy_resources(NER_REPLY)
    local.llm.server_cfg = {"model_path": "qwen2.5-coder-1.5b.gguf"}  # llm=local: the harness starts llama.cpp
    h = hippo(local, cache=False, synonyms=False)
    h.search("Where was the president of France born?", 6)
    assert h.ner_json is False and "response_format" not in local.llm.calls[0]["params"]
    forced = toy_resources(NER_REPLY)
    forced.llm.server_cfg = {"model_path": "x.gguf"}
    h = hippo(forced, cache=False, synonyms=False, ner_json=True)
    h.search("Where was the president of France born?", 6)
    assert forced.llm.calls[0]["params"]["response_format"] == {"type": "json_object"}
    off = toy_resources(NER_REPLY)
    h = hippo(off, cache=False, synonyms=False, ner_json=False)
    h.search("Where was the president of France born?", 6)
    assert "response_format" not in off.llm.calls[0]["params"]


def test_ner_json_mode_reaches_the_http_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real client (llm=openai_compatible's shape: a base_url, no server) sends response_format in the body."""
    from gear_repro.llm import LLMClient
    from tests.test_llm_client import KEY_ENV, SECRET, FakeOpenAI

    monkeypatch.setenv(KEY_ENV, SECRET)
    fake = FakeOpenAI()
    client = LLMClient(model="fake-model", base_url=fake.url, api_key_env=KEY_ENV, timeout_s=5.0, max_retries=1,
                       cache_dir=str(tmp_path / "llm_cache"))
    try:
        res = toy_resources("")
        res.llm = client
        hippo(res, cache=False, synonyms=False, ner_params={"max_tokens": 300}).search("Who is Emmanuel Macron?", 6)
    finally:
        client.close()
        fake.close()
    body = fake.requests[0]["body"]
    assert body["response_format"] == {"type": "json_object"} and body["max_tokens"] == 300


def test_ner_json_setting_composes_and_names_the_row(compose) -> None:
    from gear_repro.reporting.runs import RunResult

    assert compose(["agent=hipporag"]).hipporag.ner_json is None  # auto
    base = {"agent": {"_target_": "gear_repro.methods.hipporag.method.HippoRAGMethod"},
            "dataset": {"paper_name": "MuSiQue"}, "retriever": {"name": "bm25"}}
    for llm, ner_json, label in (({"server": None}, None, "HippoRAG"), ({"server": None}, True, "HippoRAG"),
                                 ({"server": None}, False, "HippoRAG (NER without JSON mode)"),
                                 ({"server": {"n_ctx": 8192}}, False, "HippoRAG"),
                                 ({"server": {"n_ctx": 8192}}, True, "HippoRAG (NER JSON mode)")):
        cfg = {**base, "llm": llm, "hipporag": {"version": "v1", "ner_json": ner_json}}
        assert RunResult(Path("x"), cfg, {}).method == label, (llm, ner_json)


def reference_edges(g, triples: list[Triple], found, version: str) -> dict[tuple[int, int], float]:
    """The graph's undirected edges computed as the reference's ``build_graph`` does, with dicts of directed
    entries: relation counts both ways, a synonym entry overwriting its direction, v2's passage -> phrase 1.0,
    self loops dropped, the two directions summed."""
    idx = g.phrase_index
    directed: dict[tuple[int, int], float] = {}
    for t in triples:
        a, b = idx[phrase_key(t.subject)], idx[phrase_key(t.object)]
        directed[a, b] = directed.get((a, b), 0.0) + 1.0
        directed[b, a] = directed.get((b, a), 0.0) + 1.0
    for i, j, s in found:
        directed[i, j] = s
    if version == "v2":
        m = g.passage_phrase.tocsr()
        for row in range(m.shape[0]):
            for p in m.indices[m.indptr[row]:m.indptr[row + 1]]:
                directed[g.n_phrases + row, int(p)] = 1.0
    und: dict[tuple[int, int], float] = {}
    for (a, b), w in directed.items():
        if a != b:
            und[min(a, b), max(a, b)] = und.get((min(a, b), max(a, b)), 0.0) + w
    return und


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_graph_equals_the_references_dict_build_on_the_sample(version) -> None:
    """The array build (synonym entries as int32/float32 arrays, edges by np.unique) gives the reference's edges
    and weights bit for bit on the MuSiQue sample's 16k phrases, their synonyms from a hash embedder."""
    from tests.conftest import SAMPLE
    from tests.helpers.doubles import HashEmbedder

    rows = [json.loads(x) for x in (SAMPLE / "triples.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    passages = [json.loads(x)["id"] for x in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    triples = [Triple(r["id"], r["subject"], r["predicate"], r["object"], r["passage_id"]) for r in rows]
    triples = [t for t in triples if phrase_key(t.subject) and phrase_key(t.object)]
    emb = HashEmbedder(64)
    g = build_phrase_graph(triples, passages, emb.encode, version=version, synonym_threshold=0.6)
    found = synonym_pairs(emb.encode(g.phrases), 0.6, 100, np.array([alnum_length(p) >= 3 for p in g.phrases]))
    assert g.stats["synonym_entries"] == len(found) > 10_000
    want = reference_edges(g, triples, found, version)
    assert [tuple(e) for e in g.edges.tolist()] == sorted(want)
    assert g.weights.tolist() == [want[e] for e in sorted(want)]


def test_the_igraph_built_in_chunks_is_the_same_graph() -> None:
    """Edges added a chunk at a time keep their ids: the same edge list, weights and PPR, bit for bit."""
    g = build_phrase_graph(TOY_GRAPH_TRIPLES, ["d0", "d1", "d2", "d3"], fake_embed)
    whole = g.igraph()
    chunked = PhraseGraph(g.phrases, g.passage_ids, g.edges, g.weights, g.passage_phrase).igraph(edge_chunk=2)
    assert len(g.edges) > 2 and chunked.get_edgelist() == whole.get_edgelist()
    assert chunked.es["weight"] == whole.es["weight"]
    reset = np.arange(g.n_nodes, dtype=np.float64) + 1
    assert whole.personalized_pagerank(directed=False, damping=0.5, reset=reset.tolist(), weights="weight") == \
        chunked.personalized_pagerank(directed=False, damping=0.5, reset=reset.tolist(), weights="weight")
