"""GRIEVER components on a toy corpus with hand-checked outputs (clause split, partial triples, same_as,
matcher scores, shortlisting, scoring, rewrite, the two iterations), the composed retriever, and the
Resources wiring (``retriever=griever`` as base retriever; its triple-side retriever)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryBackend
from gear_repro.methods.griever.index import GrieverData, SameAsConfig, ShortlistIndex
from gear_repro.methods.griever.matcher import EntityMatcher
from gear_repro.methods.griever.retriever import GrieverRetriever, ScoredTriple
from gear_repro.methods.griever.text import ngram_spans, rewrite, split_clauses, words
from gear_repro.retrieval import ComposedRetriever
from gear_repro.types import Passage, Triple
from tests.helpers.doubles import TableEmbedder
from tests.helpers.es_fixtures import gear_cache
from tests.helpers.paper_setting import put_on_paper_setting

NAPOLEON = ("When did Napoleon occupy the city where the mother of the woman who brought Louis XV style to "
            "the court died?")


def bow_embedder(dim: int = 64, table: dict[str, list[float]] | None = None) -> TableEmbedder:
    """Bag of words over GRIEVER's own word split: each casefolded word has a fixed unit vector (``table`` or
    seeded by the word), a text the normalised mean of its words', so the n-gram vector of "acme corp" equals the
    embedding of the text "Acme Corp" exactly (cosine 1)."""
    return TableEmbedder(dim, table, key=str.casefold, split=lambda t: [w.text for w in words(t)],
                         model_id=f"bow-{dim}")


PASSAGES = [
    Passage("0", "The North Star", "The North Star was an abolitionist newspaper published by Frederick Douglass."),
    Passage("1", "Frederick Douglass", "Frederick Douglass married Helen Pitts in 1884."),
    Passage("2", "Helen Pitts", "Helen Pitts Douglass was an American suffragist born in Honeoye."),
    Passage("3", "Frederick Douglass (engineer)", "F. Douglass engineer built bridges in Ohio."),
    Passage("4", "Honeoye", "Honeoye is a hamlet in Ontario County, New York."),
    Passage("5", "Rochester", "Rochester is a city in New York state on Lake Ontario."),
]
TRIPLES = [
    Triple("t0", "The North Star", "published by", "Frederick Douglass", "0"),
    Triple("t1", "The North Star", "is", "abolitionist newspaper", "0"),
    Triple("t2", "Frederick Douglass", "spouse", "Helen Pitts", "1"),
    Triple("t3", "Frederick Douglass", "married in", "1884", "1"),
    Triple("t4", "Helen Pitts Douglass", "born in", "Honeoye", "2"),
    Triple("t5", "Frederick Douglass", "occupation", "engineer", "3"),
    Triple("t6", "Honeoye", "located in", "Ontario County", "4"),
    Triple("t7", "Rochester", "located in", "New York", "5"),
    Triple("t8", "Helen Pitts", "spouse", "Frederick Douglass", "2"),
]
QUESTION = "Who married the publisher of abolitionist newspaper The North Star?"


@pytest.fixture
def cache(tmp_path: Path):
    with gear_cache(tmp_path / "cache") as p:
        yield p


def make_griever(cache, emb=None, passages=PASSAGES, triples=TRIPLES, **settings) -> GrieverRetriever:
    emb = emb or bow_embedder()
    # the toy's expected rankings were written under stop words + stemming ("published" ~ "publisher"); the default,
    # ES's standard analysis, ranks "abolitionist newspaper" above Frederick Douglass's triple
    backend = MemoryBackend(bm25={"analyzer": "english"})
    coll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in passages], emb)
    settings.setdefault("same_as", {"threshold": 0.8, "max_aliases": 5})
    return GrieverRetriever(coll, emb, passages, triples, backend, **settings)


# -- §4.2.1 clause splitting --------------------------------------------------------------------------
def test_split_clauses_paper_example():
    assert split_clauses(NAPOLEON) == [
        NAPOLEON,
        "the mother of the woman who brought Louis XV style to the court died?",
        "brought Louis XV style to the court died?",
    ]


def test_split_clauses_no_connector_leading_connector_and_short_tail():
    assert split_clauses("Who wrote Hamlet?") == ["Who wrote Hamlet?"]  # leading "Who" is no split point
    assert split_clauses("the band that won") == ["the band that won"]  # "won" is 1 word < min_words
    assert split_clauses("the band that won it", include_full=False) == ["won it"]


def test_ngrams_trim_stopwords():
    ws = words("the city of Paris")
    spans = ngram_spans(ws, 3)
    got = [" ".join(w.text for w in ws[i:j]) for i, j in spans]
    assert got == ["the city", "city", "city of Paris", "Paris"]  # 4-grams exceed max_n=3


# -- §4.5 rewrite ------------------------------------------------------------------------------------
def test_rewrite_replaces_entity_and_adjacent_predicate():
    q = "Who married the publisher of The North Star?"
    ws = words(q)  # Who married the publisher of The North Star
    assert rewrite(q, ws, (5, 8), "Frederick Douglass", (3, 4)) == "Who married the Frederick Douglass?"
    assert rewrite(q, ws, (5, 8), "Frederick Douglass") == "Who married the publisher of Frederick Douglass?"
    # a predicate mention far from the entity is removed separately
    assert rewrite(q, ws, (5, 8), "F. D.", (1, 2)) == "Who the publisher of F. D.?"


# -- §4.1 offline indexes ----------------------------------------------------------------------------
def test_partial_triples_units_and_freq():
    data = GrieverData.build(PASSAGES, TRIPLES, None)
    units = {(u.anchor, u.predicate, u.inverse): u for u in data.units}
    fwd = units[("frederick douglass", "spouse", False)]
    assert fwd.text == "Frederick Douglass spouse" and fwd.complements == ("helen pitts",)
    assert fwd.passage_ids == ("1",) and fwd.triple_ids == ("t2",)
    inv = units[("frederick douglass", "published by", True)]
    assert inv.text == "published by Frederick Douglass" and inv.complements == ("the north star",)
    located = units[("the north star", "published by", False)]
    assert located.complements == ("frederick douglass",)
    # "Frederick Douglass" is spouse-object once (t8) -> the inverse partial groups it
    assert units[("frederick douglass", "spouse", True)].triple_ids == ("t8",)
    assert len(data.units) == 2 * len(TRIPLES) - 0  # every (anchor, predicate, direction) is distinct here
    assert data.freq("the north star", "published by", False) == 1
    assert data.passage_subjects["0"] == ["the north star"]
    assert data.passage_objects["0"] == ["frederick douglass", "abolitionist newspaper"]
    assert data.entity_passages["frederick douglass"] == ["0", "1", "2", "3"]


def test_partial_freq_counts_complements():
    trs = [Triple("a", "X", "member", "A", "0"), Triple("b", "X", "member", "B", "1"),
           Triple("c", "X", "member", "A", "1")]
    data = GrieverData.build([Passage("0", "", "x"), Passage("1", "", "y")], trs, None)
    u = next(u for u in data.units if u.anchor == "x" and not u.inverse)
    assert u.complements == ("a", "b") and u.passage_ids == ("0", "1") and u.triple_ids == ("a", "b", "c")
    assert data.freq("x", "member", False) == 2 and data.freq("a", "member", True) == 1


def test_full_triples_units():
    data = GrieverData.build(PASSAGES, TRIPLES, None, ShortlistIndex.full)
    assert [u.text for u in data.units][:2] == ["The North Star published by Frederick Douglass",
                                                "The North Star is abolitionist newspaper"]
    assert all(len(u.triple_ids) == 1 for u in data.units)


def test_same_as_threshold_and_token_overlap():
    # "helen pitts douglass" ~ "helen pitts" (shared tokens, orthogonal words: cos = 2 / sqrt(6) = 0.8165);
    # "rochester" ~ "honeoye" have cos 0.9 but share no token -> never aliases
    onehot = lambda i: [0.0] * i + [1.0]  # noqa: E731
    emb = bow_embedder(table={"rochester": [1, 0.5], "honeoye": [1, 0.4], "helen": onehot(10), "pitts": onehot(11),
                             "douglass": onehot(12)})
    data = GrieverData.build(PASSAGES, TRIPLES, emb, same_as=SameAsConfig(threshold=0.8))
    cos = float(emb._text("Helen Pitts Douglass") @ emb._text("Helen Pitts"))
    assert cos == pytest.approx(0.8165, abs=1e-3)
    assert data.same_as_entity["helen pitts"] == ["helen pitts douglass"]  # "frederick douglass": 1/sqrt(6)
    assert data.same_as_entity["helen pitts douglass"] == ["helen pitts"]
    assert float(emb._text("Rochester") @ emb._text("Honeoye")) > 0.9
    assert "rochester" not in data.same_as_entity and "honeoye" not in data.same_as_entity
    strict = GrieverData.build(PASSAGES, TRIPLES, emb, same_as=SameAsConfig(threshold=0.85))
    assert "helen pitts" not in strict.same_as_entity


def test_a_huge_entity_set_gets_smaller_cosine_blocks_and_the_same_aliases(monkeypatch):
    from gear_repro.methods.griever import index

    # at MuSiQue's full size (1.48M entity and predicate names) 2,048-row blocks would be 11 GiB: a run died there
    assert index.block_rows(2048, 1_482_622) == 90 and index.block_rows(2048, 20_000) == 2048
    assert index.block_rows(2048, 10**9) == 1
    onehot = lambda i: [0.0] * i + [1.0]  # noqa: E731
    emb = bow_embedder(table={"helen": onehot(10), "pitts": onehot(11), "douglass": onehot(12)})
    whole = GrieverData.build(PASSAGES, TRIPLES, emb, same_as=SameAsConfig(threshold=0.8)).same_as_entity
    monkeypatch.setattr(index, "SIMS_BYTES", 4 * 10 * 3)  # 3 rows a block on these ~10 entities
    assert index.block_rows(2048, 10) == 3
    assert GrieverData.build(PASSAGES, TRIPLES, emb, same_as=SameAsConfig(threshold=0.8)).same_as_entity == whole
    assert whole["helen pitts"] == ["helen pitts douglass"]


# -- §4.3 matcher ------------------------------------------------------------------------------------
def test_matcher_ngram_scores():
    emb = bow_embedder()
    m = EntityMatcher(emb, max_ngram=4)
    enc = m.encode(QUESTION)
    got = {" ".join(w.text for w in enc.words[i:j]) for i, j in enc.spans}
    assert "The North Star" in got and "the publisher" in got and "of abolitionist" not in got
    ents = np.stack([emb._text("North Star"), emb._text("Frederick Douglass"), emb._text("abolitionist newspaper")])
    sims, arg = EntityMatcher.best(enc, ents)
    assert sims[0] == pytest.approx(1.0, abs=1e-6)
    assert " ".join(w.text for w in enc.words[slice(*enc.spans[arg[0]])]) == "North Star"
    assert sims[2] == pytest.approx(1.0, abs=1e-6)
    # no word of "Frederick Douglass" is in the query: its best n-gram cosine is far below 1
    assert sims[1] < 0.5


def test_entity_score_takes_best_alias(cache):
    g = make_griever(cache)
    g.build()
    enc = g.matcher.encode("Where was Helen Pitts Douglass born?")
    s = g.entity_scores(enc, ["helen pitts"], {"helen pitts": ["helen pitts douglass"]})
    assert s["helen pitts"][0] == pytest.approx(1.0, abs=1e-6)
    alone = g.entity_scores(enc, ["helen pitts"], {})
    assert alone["helen pitts"][0] == pytest.approx(1.0, abs=1e-6)  # the 2-gram "Helen Pitts" is in q too
    enc2 = g.matcher.encode("Where was Mrs Douglass born?")
    s2 = g.entity_scores(enc2, ["helen pitts"], {"helen pitts": ["helen pitts douglass"]})
    assert s2["helen pitts"][0] > g.entity_scores(enc2, ["helen pitts"], {})["helen pitts"][0]


# -- §4.4 scoring, Alg. 2 shortlisting, §4.5 rewrite, Alg. 1 ---------------------------------------------
def test_score_triples_eq1_eq2(cache):
    g = make_griever(cache)
    g.build()
    enc = g.matcher.encode(QUESTION)
    scored = {t.id: t for t in g._score_triples(enc, ["t0", "t1"], {}, 0)}
    e = lambda text: float(EntityMatcher.best(enc, g.matcher.encoder.encode([text]))[0][0])  # noqa: E731
    s_star, s_fd, s_pub = e("The North Star"), e("Frederick Douglass"), e("published by")
    # t0: forward partial (North Star, published by) beats the inverse (published by, Frederick Douglass)
    assert scored["t0"].score == pytest.approx((s_star + s_pub) / 2, abs=1e-5)
    assert (scored["t0"].anchor, scored["t0"].complement, scored["t0"].inverse) == (
        "the north star", "frederick douglass", False)
    assert s_star > s_fd
    # t1 (North Star, is, abolitionist newspaper): both entities are in q verbatim (cosine 1), the partials
    # tie and the forward one is kept
    s_abol, s_is = e("abolitionist newspaper"), e("is")
    assert s_abol == pytest.approx(s_star) == pytest.approx(1.0)
    assert scored["t1"].score == pytest.approx((1.0 + s_is) / 2, abs=1e-5) and not scored["t1"].inverse


def test_eq1_divides_by_log_frequency(cache):
    trs = [Triple("a", "Acme", "member", "Ann", "0"), Triple("b", "Acme", "member", "Bob", "0"),
           Triple("c", "Acme", "member", "Cid", "0")]
    g = make_griever(cache, passages=[Passage("0", "Acme", "Acme members are Ann, Bob and Cid.")], triples=trs)
    g.build()
    enc = g.matcher.encode("Who is a member of Acme?")
    t = g._score_triples(enc, ["a"], {}, 0)[0]
    e = lambda text: float(EntityMatcher.best(enc, g.matcher.encoder.encode([text]))[0][0])  # noqa: E731
    fwd = (e("Acme") + e("member")) / (2 * (1 + math.log(3)))  # (Acme, member) has 3 complements
    inv = (e("Ann") + e("member")) / 2  # (member, Ann) has one
    assert e("Acme") == pytest.approx(1.0) and fwd == pytest.approx(1 / (1 + math.log(3)))
    # the frequent partial is discounted below the rare inverse one (Eq. 1), so the triple takes inv
    assert inv > fwd and t.inverse and t.anchor == "ann" and t.complement == "acme"
    assert t.score == pytest.approx(inv, abs=1e-5)


def test_shortlist_keeps_triples_of_top_units(cache):
    g = make_griever(cache, t_max=2)
    g.build()
    enc = g.matcher.encode(QUESTION)
    kept, syn, _ = g._shortlist(QUESTION, enc, ["0", "1"], ["0", "1"])
    # 4 triples in passages 0-1 (t0..t3); the 2 best units by RRF(BM25, kNN) select t0 and t1 (the North
    # Star partials); the others are dropped
    assert kept == ["t0", "t1"]
    everything, _, _ = make_griever(cache, shortlist=False)._shortlist(QUESTION, enc, ["0", "1"], ["0", "1"])
    assert everything == ["t0", "t1", "t2", "t3"]
    assert syn == {"helen pitts": ["helen pitts douglass"]}  # the only aliased entity of passages 0-1


def test_griever_two_iterations_follow_the_bridge(cache):
    # "publisher"/"published" and "married"/"spouse" share word vectors (the toy's synonyms)
    one = [0.0] * 20 + [1.0]
    emb = bow_embedder(table={"publisher": one, "published": one, "married": one[1:], "spouse": one[1:]})
    g = make_griever(cache, emb, split_clauses=False)
    ranking, trace = g.retrieve_traced(QUESTION, 2)
    it1, it2 = trace["iterations"]
    assert it1["passages"][0] == "0"  # the North Star passage
    assert it1["join"][0] == "frederick douglass"  # the unmatched complement of the best triple
    # §4.5: "the publisher of abolitionist newspaper The North Star" -> the complement entity
    assert "Frederick Douglass" in it2["query"] and "North Star" not in it2["query"]
    # iteration 2 only sees new passages holding a join entity
    assert set(it2["passages"]).isdisjoint(it1["passages"])
    assert all("frederick douglass" in g.store.data.passage_entities[p] or
               any(a in g.store.data.passage_entities[p] for a in g.store.data.same_as_entity.get(
                   "frederick douglass", [])) for p in it2["passages"])
    # iteration 2's best triple is t8 (Helen Pitts, spouse, Frederick Douglass): inverse partial, both the
    # entity and the predicate ("married") match the rewritten query -> 1.0; passage 0's t0 joins it through
    # Frederick Douglass: s_t0 * (s_t0 + s_t8) / 2
    assert it2["best"][0] == ("t8", pytest.approx(1.0))
    s0 = dict(it1["best"])["t0"]
    assert ranking.ids == ["2", "0"]
    assert ranking.scores == pytest.approx([1.0, s0 * (s0 + 1.0) / 2], abs=1e-3)


def test_scoring_query_original_scores_iteration_two_against_the_question(cache):
    """§4.2's prose ("scored the highest with respect to the original text query") as a switch: iteration 2
    retrieves with the rewritten query but shortlists and scores against the question, where the bridge entity is
    absent, so t8 no longer scores 1.0; the default (Alg. 1) scores against the rewritten query (test above)."""
    one = [0.0] * 20 + [1.0]
    emb = bow_embedder(table={"publisher": one, "published": one, "married": one[1:], "spouse": one[1:]})
    _, trace = make_griever(cache, emb, split_clauses=False, scoring_query="original").retrieve_traced(QUESTION, 2)
    it1, it2 = trace["iterations"]
    assert "Frederick Douglass" in it2["query"]  # retrieval still uses the rewrite
    assert dict(it2["best"]).get("t8", 0.0) < 0.9
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="retriever.scoring_query"):
        make_griever(cache, scoring_query="both")


def test_rewrite_replaces_the_mention_the_alias_matched(cache):
    """§4.3 ranks a triple by the best n-gram over its entity and aliases; §4.5 replaces that mention. "Pitts
    Douglass" matches the alias "Helen Pitts Douglass" better than any n-gram matches "Helen Pitts" ("Pitts"), so
    the whole mention is replaced, not "Pitts" alone (which left "... Honeoye Douglass ...")."""
    g = make_griever(cache)
    g.build()
    q = "Where did Mrs Pitts Douglass live?"
    enc = g.matcher.encode(q)
    t = ScoredTriple("t4", 0.9, "helen pitts", "born in", "honeoye", False, 0)
    syn = {"helen pitts": ["helen pitts douglass"]}
    assert g._rewrite(q, enc, [t], syn) == "Where did Mrs Honeoye live?"
    assert g._rewrite(q, enc, [t], {}) == "Where did Mrs Honeoye Douglass live?"  # the alias unused: half a name


def test_rank_passages_path_scores(cache):
    from gear_repro.methods.griever.retriever import ScoredTriple

    g = make_griever(cache)
    g.build()
    graph = [ScoredTriple("t0", 0.8, "the north star", "published by", "frederick douglass", False, 0),
             ScoredTriple("t2", 0.4, "frederick douglass", "spouse", "helen pitts", False, 1),
             ScoredTriple("t6", 0.5, "honeoye", "located in", "ontario county", False, 1)]
    r = g._rank({"0": 0, "1": 1, "4": 2, "5": 3}, graph, {}, 4)
    # t0: max(0.8 * 0.8, 0.8 * (0.8 + 0.4) / 2) = 0.64; t2: 0.4 * 0.6 = 0.24 (path t0-t2 via Frederick
    # Douglass beats t2 alone, 0.16); t6: 0.25; passage 5 has no scored triple -> last
    assert r.ids == ["0", "4", "1", "5"]
    assert r.scores == pytest.approx([0.64, 0.25, 0.24, 0.0])


def test_first_iteration_composed_or_hybrid(cache):
    """Iteration 1 is the composed retriever (default) or, for the Table 3 ablation, the RRF hybrid."""
    from gear_repro.retrieval import HybridRetriever

    emb = bow_embedder()
    g = make_griever(cache, emb, split_clauses=False)
    h = make_griever(cache, emb, split_clauses=False, composed=False)
    g.build(), h.build()
    enc = g.matcher.encode(QUESTION)
    assert g._first_retrieval(QUESTION, enc, 3).ids == ComposedRetriever(g.collection, emb).retrieve(QUESTION, 3).ids
    assert h._first_retrieval(QUESTION, enc, 3).ids == HybridRetriever(g.collection, emb).retrieve(QUESTION, 3).ids


def test_full_triples_shortlist_keeps_the_best_triples(cache):
    from gear_repro.core.fusion import rrf

    b = make_griever(cache, shortlist_index="full", t_max=2)
    b.build()
    assert b.store.data.unit_kind == ShortlistIndex.full and len(b.store.data.units) == len(TRIPLES)
    enc = b.matcher.encode(QUESTION)
    kept, _, _ = b._shortlist(QUESTION, enc, ["0", "1"], ["0", "1"])
    anchors = ["the north star", "frederick douglass", "helen pitts", "helen pitts douglass"]
    top = rrf([b.store.unit_bm25(QUESTION, 2, ["0", "1"], anchors),
               b.store.unit_knn(enc.sentence, 2, ["0", "1"], anchors)], limit=2).ids
    assert len(kept) == 2 and sorted(kept) == sorted(u.removeprefix("ft:") for u in top)


def test_inner_k_pool_returns_up_to_k(cache):
    g = make_griever(cache, inner_k=1)
    r, trace = g.retrieve_traced(QUESTION, 5)
    assert [len(it["passages"]) for it in trace["iterations"]] == [1, 1] and len(r) == 2


# -- composed retriever ------------------------------------------------------------------------------
def test_composed_rescores_bm25_candidates(cache):
    emb = bow_embedder()
    coll = MemoryBackend().open_collection("passages", [IndexDoc(p.id, p.content) for p in PASSAGES], emb)
    r = ComposedRetriever(coll, emb, candidates=3)
    q = "Frederick Douglass married"
    bm = coll.bm25([q], 3)[0].ids
    got = r.retrieve(q, 2)
    cos = {i: float(coll.vectors()[int(i)] @ emb.encode([q])[0]) for i in bm}
    assert got.ids == sorted(bm, key=lambda i: -cos[i])[:2]
    assert got.scores == pytest.approx(sorted(cos.values(), reverse=True)[:2])
    assert set(got.ids) <= set(bm)


# -- wiring ------------------------------------------------------------------------------------------
def test_resources_build_griever_and_hybrid_triple_retriever(compose, toy_dir, cache, monkeypatch):
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.wiring import passage_retriever, triple_retriever
    from gear_repro.retrieval import HybridRetriever

    cfg = compose(["retriever=griever", f"dataset.path={toy_dir}", "dataset.name=toy"])
    res = Resources(cfg, embedder=bow_embedder())
    assert isinstance(passage_retriever(res), GrieverRetriever)
    assert isinstance(triple_retriever(res), HybridRetriever)
    r = passage_retriever(res).retrieve("Where was the president of France born?", 2)
    assert len(r) == 2 and set(r.ids) <= {p.id for p in res.dataset.passages}
    assert re.fullmatch(r"\d", r.ids[0])


@pytest.mark.parametrize("experiment,retriever,key,value", [
    ("griever_table1", "composed", "candidates", 100),
    ("griever_table3_ablation", "griever_full", "shortlist_index", "full"),
    ("griever_table3_ablation", "griever_no_shortlist", "shortlist", False),
    ("griever_table3_ablation", "griever_no_composed", "composed", False),
    ("griever_table4_gear", "griever_k5", "inner_k", 5),
])
def test_presets_and_variants_compose(compose, experiment, retriever, key, value):
    cfg = compose([f"experiment={experiment}", f"retriever={retriever}"])
    assert cfg.retriever[key] == value and cfg.report.paper == "GRIEVER"
    if retriever.startswith("griever"):
        assert cfg.retriever.triple_retriever._target_.endswith("HybridRetriever")
        assert cfg.retriever.t_max == 30  # the rest comes from griever.yaml


def test_report_labels_follow_the_griever_tables(tmp_path):
    from gear_repro.reporting.runs import RunResult
    from gear_repro.reporting.tables import long_table

    labels = {"hybrid": "RRFHybrid", "griever_k5": "GRIEVER", "griever": "GRIEVER"}

    put_on_paper_setting(tmp_path, "GRIEVER", "Table 1", "MuSiQue")  # these rows' cells, not the placement rule

    def run(agent, ret, table):
        cfg = {"agent": {"name": agent}, "retriever": {"name": ret}, "dataset": {"paper_name": "MuSiQue"},
               "report": {"paper": "GRIEVER", "table": table, "labels": labels}}
        return RunResult(tmp_path, cfg, {"recall@5": 50.0})

    assert run("gear", "griever_k5", "Table 4").method == "GEAR + GRIEVER"
    assert run("ircot", "hybrid", "Table 4").method == "IRCoT + RRFHybrid"
    assert run("single", "griever", "Table 1").method == "GRIEVER"
    df = long_table([run("gear", "griever_k5", "Table 4"), run("single", "griever", "Table 1")])
    assert df["paper"].tolist() == [55.7, 45.6]  # paper_results.csv, paper GRIEVER


def test_composed_unit_vectors_are_normalised_name_sums():
    emb = bow_embedder()
    data = GrieverData.build(PASSAGES, TRIPLES, emb, unit_vectors="compose")
    u = next(u for u in data.units if (u.anchor, u.predicate, u.inverse) == ("frederick douglass", "spouse", False))
    v = emb.encode(["Frederick Douglass"])[0] + emb.encode(["spouse"])[0]
    row = data.units.index(u)
    assert np.allclose(data.unit_vectors()[row], v / np.linalg.norm(v), atol=1e-6)


def test_cached_name_and_unit_vectors_are_read_through_a_map_with_the_values_of_an_uncached_build(cache):
    # a SentenceEmbedder's cache files are memory-mapped, not loaded (5.4 GiB at MuSiQue's full size, docs/scale.md)
    from tests.helpers.doubles import HashEmbedder

    emb, off = HashEmbedder(), HashEmbedder()
    off.cache = False
    same_as = SameAsConfig(threshold=0.3)
    mapped = GrieverData.build(PASSAGES, TRIPLES, emb, same_as=same_as)
    again = GrieverData.build(PASSAGES, TRIPLES, emb, same_as=same_as)  # from the cache files
    loaded = GrieverData.build(PASSAGES, TRIPLES, off, same_as=same_as)
    assert isinstance(loaded.name_matrix, np.ndarray) and loaded.name_matrix.flags.writeable
    for data in (mapped, again):
        for m, ref in ((data.name_matrix, loaded.name_matrix), (data.unit_vectors(), loaded.unit_vectors())):
            assert isinstance(m.base, np.memmap) and not m.flags.writeable and np.array_equal(m, ref)
        assert data.same_as_entity == loaded.same_as_entity and data.same_as_entity
        keys = list(data.entity_name)
        assert np.array_equal(data.entity_vectors(keys), loaded.entity_vectors(keys))
    assert emb.stats["corpus_cache_hits"] == 2


@pytest.mark.parametrize("shown", [True, False])
def test_the_build_shows_bars_as_the_embedder_does(cache, capsys, monkeypatch, shown):
    from gear_repro.utils import io

    monkeypatch.setattr(io, "BAR_MIN_RECORDS", 1)  # at full size: 1.5M triples, 2.3M units, 1.5M entities
    emb = bow_embedder()
    emb.show_progress = shown
    make_griever(cache, emb).build()
    err = capsys.readouterr().err
    for desc in ("griever triples", "griever units", "griever same_as aliases"):
        assert (f"{desc}: 100%" in err) is shown


def test_matcher_lower_cases_for_a_do_lower_case_model_keeping_offsets():
    from gear_repro.methods.griever.matcher import _cased_as_model

    class Module:
        do_lower_case = True

    # sentence-transformers < 6 lower-cased in `tokenize`: a cased model that sets it is matched lower-cased, and a
    # character whose lower case is longer ("İ" -> "i̇") is kept, so the tokenizer's offsets still index the text
    assert _cased_as_model([Module()], "Stanley HALL İx") == "stanley hall İx"
    assert _cased_as_model([object()], "Stanley HALL") == "Stanley HALL"
    assert _cased_as_model(object(), "Stanley HALL") == "Stanley HALL"


def test_unknown_setting_is_a_config_error(cache):
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="t_maxx"):
        make_griever(cache, t_maxx=3)
    with pytest.raises(ConfigError, match=r"retriever\.final must be one of \['graph', 'rrf'\], got 'best'"):
        make_griever(cache, final="best")


@pytest.mark.parametrize("expansion,berlin_rank", [("none", 0), ("naive", 4)])
def test_runner_with_griever_as_base_retriever(compose, toy_dir, tmp_path, cache, expansion, berlin_rank):
    """retriever=griever through the runner: plain and as NaiveGE's base (the triple graph is built beside it)."""
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    cfg = compose(["retriever=griever", f"expansion={expansion}", f"dataset.path={toy_dir}", "dataset.name=toy",
                   "run.progress=false"])
    res = Resources(cfg, embedder=bow_embedder())
    m = Runner(cfg, tmp_path / "run", resources=res).run()
    assert m["n_questions"] == 3 and 0.0 <= m["recall@5"] <= 100.0
    preds = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    q2 = next(p for p in preds if p["id"] == "q2")
    # "What is the capital of Germany?" -> the Berlin passage: first from GRIEVER; within the 5 after NaiveGE's RRF
    assert q2["rankings"]["5"].index("1") <= berlin_rank
    assert set(q2["rankings"]) >= {"5", "10", "15"}  # GRIEVER is k-dependent: one pass per evaluated k


# -- Alg. 2's join entities, chain paths, the same_as passage filter, Table 4 IRCoT preset ------------------
def _bridge_griever(cache, **settings) -> GrieverRetriever:
    one = [0.0] * 20 + [1.0]
    emb = bow_embedder(table={"publisher": one, "published": one, "married": one[1:], "spouse": one[1:]})
    return make_griever(cache, emb, split_clauses=False, **settings)


def test_join_from_shortlist_takes_every_shortlisted_partials_complement(cache):
    # Alg. 2: E_j = complements of every shortlisted partial whose triple is in T; passages 0-1 hold t0-t3, and
    # the "p o" partial of t0 ("published by Frederick Douglass") contributes its subject, The North Star
    _, trace = _bridge_griever(cache).retrieve_traced(QUESTION, 2)
    assert trace["iterations"][0]["join"] == ["frederick douglass", "the north star", "abolitionist newspaper",
                                               "1884", "helen pitts"]
    _, top = _bridge_griever(cache, join_from="top", n_join=1).retrieve_traced(QUESTION, 2)
    assert top["iterations"][0]["join"] == ["frederick douglass"]  # the best triple's complement only


def test_paths_chain_across_iterations_or_pair_on_shared_entities(cache):
    from gear_repro.methods.griever.retriever import ScoredTriple

    graph = [ScoredTriple("t0", 0.9, "the north star", "published by", "frederick douglass", False, 0),
             ScoredTriple("t2", 0.4, "frederick douglass", "spouse", "helen pitts", False, 1),
             ScoredTriple("t5", 0.9, "frederick douglass", "occupation", "engineer", False, 1),
             ScoredTriple("t4", 0.6, "helen pitts douglass", "born in", "honeoye", False, 2)]
    aliases = {"helen pitts": ["helen pitts douglass"]}
    pool = {"0": 0, "1": 1, "3": 2, "2": 3}
    chain = _bridge_griever(cache)
    chain.build()

    def by_passage(r) -> dict[str, float]:
        return dict(zip(r.ids, r.scores, strict=True))

    r = chain._rank(pool, graph, aliases, 4)
    # chains t0 -> t2 -> t4 (t2's complement Helen Pitts ~ t4's anchor) and t0 -> t5; t2 and t5 (same iteration,
    # same subject) never pair; t2 -> t4 alone: 0.5. t2: best mean (0.9 + 0.4) / 2 = 0.65 -> 0.26; t4: (0.9 + 0.4 + 0.6) / 3 -> 0.38
    assert by_passage(r) == pytest.approx(
        {"0": 0.81, "3": 0.81, "2": 0.6 * 1.9 / 3, "1": 0.4 * 0.65})
    pairs = _bridge_griever(cache, paths="pairs")
    pairs.build()
    r = pairs._rank(pool, graph, aliases, 4)
    # pairs: t4 only pairs (with t2 via the alias): 0.6 * max(0.6, 0.5); no three-triple path
    assert by_passage(r)["2"] == pytest.approx(0.6 * 0.6)
    # without t0, t2 pairs with t5 (same iteration, shared subject) but chains with nothing
    rest = [t for t in graph if t.id != "t0"]
    assert by_passage(pairs._rank(pool, rest, aliases, 4))["1"] == pytest.approx(0.4 * 0.65)
    assert by_passage(chain._rank(pool, rest, aliases, 4))["1"] == pytest.approx(0.4 * 0.5)  # t2 -> t4 only


def test_same_as_filter_uses_the_retrieved_passages(cache):
    """§4.2.3's Orange example: with the pool at the telecom passage, the company alias stays, the fruit goes."""
    passages = [Passage("p1", "Orange S.A.", "Orange S.A. was formerly France Telecom."),
                Passage("p2", "Orange (fruit)", "The orange fruit is a citrus."),
                Passage("p3", "Orange", "Orange, formerly France Telecom, sells phones.")]
    triples = [Triple("a", "Orange S.A.", "formerly", "France Telecom", "p1"),
               Triple("b", "orange fruit", "is a", "citrus", "p2"),
               Triple("c", "Orange", "formerly", "France Telecom", "p3")]
    syn = {"orange": ["orange s.a.", "orange fruit"]}
    kept = {}
    for mode in ("shared_neighbour", "alias_in_pool", "entity"):
        g = make_griever(cache, passages=passages, triples=triples, same_as_filter=mode)
        g.build()
        kept[mode] = g.filter_aliases(syn, ["p3"])
    assert kept == {"shared_neighbour": {"orange": ["orange s.a."]}, "alias_in_pool": {},
                    "entity": {"orange": ["orange s.a.", "orange fruit"]}}
    # the counts before/after the filter are in the trace: alias_in_pool drops Helen Pitts Douglass in iteration 1
    _, trace = _bridge_griever(cache, same_as_filter="alias_in_pool").retrieve_traced(QUESTION, 2)
    assert (trace["iterations"][0]["aliases_found"], trace["iterations"][0]["aliases_kept"]) == (2, 0)


def test_table4_ircot_preset_takes_5_passages_per_step_and_r15_only_on_musique(compose):
    for retriever in ("hybrid", "griever_k5"):
        cfg = compose(["experiment=griever_table4_ircot", f"retriever={retriever}"])
        assert cfg.agent.top_k == 5 and list(cfg.run.ks) == [5, 10, 15]  # MuSiQue: 4 steps, R@15 reported
    for dataset in ("2wiki_sample", "hotpotqa_sample"):
        cfg = compose(["experiment=griever_table4_ircot", f"dataset={dataset}"])
        assert cfg.agent.top_k == 5 and list(cfg.run.ks) == [5, 10]  # footnote 1: no R@15 with 2 steps


def test_a_blank_query_retrieves_without_error(cache):
    """IRCoT retrieves with an empty thought (agent.empty_thought: retrieve, as the reference): with
    GRIEVER as its base (experiment=griever_table4_ircot) the blank query had no clause (split_clauses gives []) and
    iteration 1 raised "zip() argument 2 is shorter", failing the question. It is its own sub-query now: the
    composed retrieval's BM25 finds no candidate (nothing), the RRF hybrid's dense list still ranks."""
    assert make_griever(cache).retrieve("", 5).ids == []
    assert make_griever(cache, split_clauses=False).retrieve(" ", 5).ids == []
    assert len(make_griever(cache, composed=False).retrieve("", 5).ids) == 5
