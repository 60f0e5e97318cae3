"""Diverse triple beam search (GEAR Alg. 1, DESIGN.md) on a hand-built graph with hand-chosen scores.

Every text (query, triple, path) gets a 2-d unit vector [c, sqrt(1-c^2)] and the query is [1, 0], so the
cosine score(q, text) is exactly the hand-chosen c. Graph (entities after normalisation):

    t1 A-B (P1) .90   t2 B-C (P2) .50   t3 B-D (P2) .60   t4 A-E (P3) .80
    t5 E-F (P3) .30   t6 C-G (P4) .40   t7 X-Y (P5) .70   t8 "  b "-H (P6) .20  (links to B)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gear_repro.backends.memory import MemoryCollection
from gear_repro.core.triple_graph import TripleIndex, normalize_entity, triple_docs
from gear_repro.methods.gear.beam_search import (
    Beam,
    BeamConfig,
    beam_search,
    diversity_weight,
    flatten_breadth_first,
    scorer_for,
)
from gear_repro.methods.gear.scorers import (
    DEFAULT_CUDA_PATH_ROWS,
    DEFAULT_PATH_ROWS,
    ApproxScore,
    CascadeOptions,
    CascadeScorer,
    ExactScorer,
    MeanScorer,
    SumScorer,
    make_scorer,
    scorer_options,
)
from gear_repro.retrieval.base import BM25Retriever
from gear_repro.types import Triple
from gear_repro.utils.errors import ConfigError
from tests.helpers.doubles import TableEmbedder

E = math.exp

TRIPLES = [
    Triple("t1", "A", "r1", "B", "P1"),
    Triple("t2", "B", "r2", "C", "P2"),
    Triple("t3", "B", "r3", "D", "P2"),
    Triple("t4", "A", "r4", "E", "P3"),
    Triple("t5", "E", "r5", "F", "P3"),
    Triple("t6", "C", "r6", "G", "P4"),
    Triple("t7", "X", "r7", "Y", "P5"),
    Triple("t8", "  b ", "r8", "H", "P6"),
]
TEXT = {t.id: t.text for t in TRIPLES}
SINGLE = {"t1": .90, "t2": .50, "t3": .60, "t4": .80, "t5": .30, "t6": .40, "t7": .70, "t8": .20}
PATH = {  # score(q, path) for concatenated paths
    ("t1", "t2"): .80, ("t1", "t3"): .85, ("t1", "t4"): .60, ("t1", "t8"): .70,
    ("t4", "t5"): .86, ("t4", "t1"): .10,
    ("t1", "t3", "t2"): .50, ("t1", "t3", "t8"): .40,
}


def _vec(c: float) -> np.ndarray:
    return np.array([c, math.sqrt(1 - c * c)], dtype=np.float32)


def table_embedder() -> TableEmbedder:
    """2-d vectors whose cosine with the query "q" is fixed per text (SINGLE, PATH; 0 for any other text)."""
    table = {"q": _vec(1.0)} | {TEXT[t]: _vec(c) for t, c in SINGLE.items()}
    table |= {" ".join(TEXT[t] for t in p): _vec(c) for p, c in PATH.items()}
    return TableEmbedder(2, table, default=_vec(0.0))


@pytest.fixture()
def graph():
    emb = table_embedder()
    index = TripleIndex(None, TRIPLES)
    index.set_vectors(emb.encode([t.text for t in TRIPLES]))
    emb.calls.clear()
    return index, emb


def ids(index: TripleIndex, beam: Beam) -> tuple[str, ...]:
    return tuple(index.ids[r] for r in beam.rows)


def run(graph, initial=None, **cfg):
    index, emb = graph
    bc = BeamConfig(**cfg)
    res = beam_search("q", initial or [t.id for t in TRIPLES], index,
                      ExactScorer(index, emb, path_cache=bc.path_cache), bc)
    return res, [(ids(index, b), b.score) for b in res.beams], res.counters


# -- triple index -------------------------------------------------------------------------------------

def test_normalize_entity():
    assert normalize_entity("  The  Beatles\t") == "the beatles"
    assert normalize_entity("STRASSE") == normalize_entity("straße")  # casefold, not lower


def test_neighbours_and_alignment(graph):
    index, _ = graph
    assert sorted(index.neighbours("t1")) == ["t2", "t3", "t4", "t8"]  # "  b " == "B" after normalisation
    assert sorted(index.neighbours("t5")) == ["t4"]
    assert index.neighbours("t7") == []
    assert index.triples_of_passage("P2") == ["t2", "t3"]
    assert index.triples_of_passage("nope") == []
    assert index.passage_of["t8"] == "P6"
    assert index.entity_degree("b") == 4


def test_hub_cap_truncate_and_drop():
    trunc = TripleIndex(None, TRIPLES, max_degree=2)  # B has degree 4 (t1, t2, t3, t8)
    assert trunc.entity_degree("B") == 2
    assert trunc.stats["hub_entities"] == 1 and trunc.stats["hub_links_removed"] == 2
    counters: dict[str, int] = {}
    nb = trunc.neighbour_rows(trunc.row["t2"], counters)  # t2's B-list is {t1, t2}
    assert sorted(trunc.ids[r] for r in nb) == ["t1", "t6"] and counters["hub_entities_capped"] == 1
    drop = TripleIndex(None, TRIPLES, max_degree=2, hub_policy="drop")
    assert sorted(drop.neighbours("t1")) == ["t4"]
    with pytest.raises(ConfigError):
        TripleIndex(None, TRIPLES, hub_policy="nope")


def test_lookup_adjacency_and_triple_link():
    coll = MemoryCollection("triples", triple_docs(TRIPLES), cache=False)
    assert triple_docs(TRIPLES)[7].fields == {"subject_key": "b", "object_key": "h", "passage_id": "P6"}
    by_rec = TripleIndex(coll, TRIPLES)
    lazy = TripleIndex(coll, TRIPLES, adjacency="lookup")
    for t in TRIPLES:
        assert sorted(lazy.neighbours(t.id)) == sorted(by_rec.neighbours(t.id))
    retr = BM25Retriever(coll)
    assert by_rec.triple_link(("E", "r5", "F"), retr) == "t5"
    assert by_rec.triple_link("X r7 Y", retr) == "t7"
    assert by_rec.link_many(["zzz unknown"], retr) == [None]


# -- Alg. 1 ------------------------------------------------------------------------------------------

def test_diversity_weight():
    assert diversity_weight(0, 2) == 1.0
    assert diversity_weight(1, 2) == pytest.approx(E(-0.5))
    assert diversity_weight(2, 2) == pytest.approx(E(-1))
    assert diversity_weight(7, 2) == pytest.approx(E(-1))  # min(n, γ)


def test_initial_beams_top_b(graph):
    res, beams, c = run(graph, length=1, width=3)
    assert beams == [(("t1",), pytest.approx(.9)), (("t4",), pytest.approx(.8)), (("t7",), pytest.approx(.7))]
    assert c["initial_triples"] == 8 and res.steps == 0


def test_reweighting_min_n_gamma(graph):
    # one initial beam [t1]; candidates t2, t3, t4, t8 (no exists hits); γ = 2
    res, beams, c = run(graph, initial=["t1"], length=2, width=5, gamma=2)
    assert beams == [
        (("t1", "t3"), pytest.approx((.9 + .85) * 1)),
        (("t1", "t2"), pytest.approx((.9 + .80) * E(-1 / 2))),
        (("t1", "t8"), pytest.approx((.9 + .70) * E(-2 / 2))),
        (("t1", "t4"), pytest.approx((.9 + .60) * E(-2 / 2))),  # n = 3 > γ: weight stays e^-1
    ]
    assert res.beams[1].path_scores == pytest.approx((.9, .8))
    assert c["candidates"] == 4


def test_gamma_defaults_to_twice_width(graph):
    _, beams, _ = run(graph, initial=["t1"], length=2, width=5, gamma=None)  # γ = 10
    assert beams[1] == (("t1", "t2"), pytest.approx(1.70 * E(-1 / 10)))
    assert BeamConfig(width=10).gamma_value == 20


def test_diverse_search_and_exists_check(graph):
    # B0 = [t1 .9, t4 .8]; exists: t4 is not a candidate of beam t1, t1 not of beam t4
    res, beams, c = run(graph, length=2, width=2, gamma=2)
    # beam t1: t1t3 1.75 (n0), t1t2 1.70·e^-.5 = 1.031, t1t8 1.60·e^-1; beam t4: t4t5 1.66 (n0)
    assert beams == [(("t1", "t3"), pytest.approx(1.75)), (("t4", "t5"), pytest.approx(1.66))]
    assert c["exists_skipped"] == 2  # t4 from t1's list, t1 from t4's list
    assert c["candidates"] == 4
    # breadth-first flattening: t1, t4, t3, t5 -> P1, P3, P2, (P3)
    assert res.triples == ["t1", "t4", "t3", "t5"]
    assert res.passages == ["P1", "P3", "P2"]


def test_no_diversity_is_plain_beam_search(graph):
    res, beams, _ = run(graph, length=2, width=2, gamma=2, diversity=False)
    assert beams == [(("t1", "t3"), pytest.approx(1.75)), (("t1", "t2"), pytest.approx(1.70))]
    assert res.passages == ["P1", "P2"]
    # equals a reference plain beam search: all extensions, global top-b by accumulated score
    index, emb = graph
    cand = []
    for b0 in ["t1", "t4"]:
        for n in index.neighbours(b0):
            if n not in ("t1", "t4"):
                cand.append(((b0, n), SINGLE[b0] + PATH[(b0, n)]))
    ref = sorted(cand, key=lambda x: -x[1])[:2]
    assert [b for b, _ in beams] == [b for b, _ in ref]


def test_exists_path_only(graph):
    _, beams, c = run(graph, length=2, width=10, gamma=2, exists="path")
    assert (("t1", "t4"), pytest.approx(1.5 * E(-1))) in beams  # t4 allowed: only the own path is excluded
    assert (("t4", "t1"), pytest.approx(0.9 * E(-0.5))) in beams


def test_length_three_dead_end_modes(graph):
    # step 2 from [t1t3 1.75, t4t5 1.66]: exists = {t1,t3,t4,t5}; t3 -> t2 (.5), t8 (.4); t5 -> nothing
    res, beams, c = run(graph, length=3, width=2, gamma=2)
    assert beams == [(("t1", "t3", "t2"), pytest.approx(1.75 + .5)),
                     (("t1", "t3", "t8"), pytest.approx((1.75 + .4) * E(-0.5)))]
    assert c["dead_end_beams"] == 1 and res.steps == 2
    _, kept, _ = run(graph, length=3, width=3, gamma=2, dead_ends="keep")
    assert kept[1] == (("t4", "t5"), pytest.approx(1.66))  # carried with its score


def test_stalled_search(graph):
    # t7 has no neighbours: fallback keeps B0, literal Alg. 1 ("drop") returns nothing
    res, beams, c = run(graph, initial=["t7"], length=2, width=2)
    assert beams == [(("t7",), pytest.approx(.7))] and c["beam_stalled"] == 1 and res.passages == ["P5"]
    res, beams, c = run(graph, initial=["t7"], length=2, width=2, dead_ends="drop")
    assert beams == [] and res.passages == [] and c["dead_end_beams"] == 1


def test_neighbour_cap_by_relevance(graph):
    # cap 1: beam t1 keeps its most query-relevant neighbour among t2 (.5), t3 (.6), t8 (.2)
    _, beams, c = run(graph, length=2, width=2, gamma=2, neighbours=1)
    assert beams == [(("t1", "t3"), pytest.approx(1.75)), (("t4", "t5"), pytest.approx(1.66))]
    assert c["neighbours_capped"] == 1 and c["candidates"] == 2
    _, beams, _ = run(graph, length=2, width=2, gamma=2, neighbours=1, neighbour_selection="order")
    assert beams == [(("t1", "t2"), pytest.approx(1.70)), (("t4", "t5"), pytest.approx(1.66))]


def test_initial_duplicates_and_unknown(graph):
    _, beams, c = run(graph, initial=["t1", "t1", "zz", "t4"], length=1, width=5)
    assert [b for b, _ in beams] == [("t1",), ("t4",)]
    assert c["initial_duplicates"] == 1 and c["initial_unknown"] == 1
    res, beams, c = run(graph, initial=["zz"])
    assert beams == [] and c["no_initial_triples"] == 1


def test_exact_scorer_encodes_paths_in_one_batch(graph):
    index, emb = graph
    run(graph, length=2, width=2)
    # B0 reuses the triple vectors: the only encode calls are q and one batch of step-1 paths
    assert emb.calls[0] == ["q"]
    assert sorted(emb.calls[1]) == sorted([f"{TEXT['t1']} {TEXT[x]}" for x in ("t2", "t3", "t8")] +
                                          [f"{TEXT['t4']} {TEXT['t5']}"])
    assert len(emb.calls) == 2


def test_breadth_first_flatten_variable_lengths():
    beams = [Beam((1, 2, 3), 1.0), Beam((4,), .9), Beam((5, 6), .8)]
    assert flatten_breadth_first(beams) == [1, 4, 5, 2, 6, 3]
    assert flatten_breadth_first([]) == []


def test_approximate_scorers(graph):
    index, emb = graph
    qv = np.array([1.0, 0.0], dtype=np.float32)
    v = index.vectors()
    r1, r3 = index.row["t1"], index.row["t3"]
    s = v[r1] + v[r3]
    assert SumScorer(index, emb).paths(qv, [(r1, r3)])[0] == pytest.approx(float(s[0] / np.linalg.norm(s)))
    assert MeanScorer(index, emb).paths(qv, [(r1, r3)])[0] == pytest.approx((.9 + .6) / 2)
    assert make_scorer("sum", index, emb).name == "sum"
    with pytest.raises(ConfigError):
        make_scorer("nope", index, emb)
    with pytest.raises(ConfigError, match=r"beam\.widht is not a setting of beam \(its settings: .*width"):
        BeamConfig.from_any({"widht": 3})


def test_exact_path_cache_on_disk(graph, tmp_path, monkeypatch):
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    index, emb = graph
    first = run(graph, length=2, width=2, gamma=2, path_cache=True)[1]
    # fixed-shape batch vectors (rows, lengths in steps of 8) have their own store; lone ones keep the old key
    assert list((tmp_path / "path_vectors" / f"table-rows{DEFAULT_PATH_ROWS}x8").glob("*.npz"))
    assert make_scorer("exact", index, emb, {"batch_size": None}, path_cache=True).store.dir.name == "table"
    emb.calls.clear()
    again = beam_search("q", [t.id for t in TRIPLES], index, make_scorer("exact", index, emb, path_cache=True),
                        BeamConfig(length=2, width=2, gamma=2))
    assert [(ids(index, b), b.score) for b in again.beams] == first
    assert emb.calls == [["q"]]  # paths came from disk: only q was encoded


def test_the_exact_scorer_takes_its_path_rows_for_the_embedders_device(graph, tmp_path, monkeypatch):
    """``cuda_batch_size`` where the embedder runs on CUDA (its passes host-bound: 32 rows, docs/encoders.md),
    ``batch_size`` elsewhere; each keys its own path store."""
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    index, emb = graph
    assert make_scorer("exact", index, emb).batch_size == DEFAULT_PATH_ROWS == 8
    monkeypatch.setattr(emb, "device", "cuda:0", raising=False)
    scorer = make_scorer("exact", index, emb, path_cache=True)
    assert scorer.batch_size == DEFAULT_CUDA_PATH_ROWS == 32 and scorer.store.dir.name == "table-rows32x8"
    assert make_scorer("exact", index, emb, {"cuda_batch_size": 16, "batch_size": 4}).batch_size == 16
    assert make_scorer("exact", index, emb, {"cuda_batch_size": None}).batch_size is None
    with pytest.raises(ConfigError, match=r"beam\.scorer_options\.cuda_batch_size"):
        make_scorer("exact", index, emb, {"cuda_batch_size": 0})


def test_hub_default_is_uncapped_and_relevance_picks_over_all_neighbours():
    """§4.2: all triples sharing an entity are neighbours (no corpus-order cap by default); the
    beam narrows a hub by relevance to q, so the most relevant neighbour is kept wherever it sits."""
    n = 1500
    hub = [Triple("seed", "Seed", "r", "Hub", "P0")]
    hub += [Triple(f"h{i}", "Hub", "r", f"O{i}", f"P{i + 1}") for i in range(n)]
    index = TripleIndex(None, hub)
    assert index.max_degree is None and index.stats["hub_entities"] == 0
    assert index.entity_degree("hub") == n + 1
    best = f"h{n - 10}"  # beyond the old default cap of the first 1,000 triples in corpus order
    vecs = np.stack([_vec(0.95 if t.id == "seed" else 0.99 if t.id == best else 0.1) for t in hub])
    index.set_vectors(vecs)
    cfg = BeamConfig(length=2, width=1, neighbours=100, scorer="mean")
    res = beam_search("q", ["seed"], index, MeanScorer(index, None), cfg, query_vector=np.array([1.0, 0.0]))
    assert [index.ids[r] for r in res.beams[0].rows] == ["seed", best]
    assert res.counters["neighbours_capped"] == 1 and "hub_entities_capped" not in res.counters


def test_hub_default_in_config_is_uncapped(compose):
    assert compose([]).graph.max_degree is None


def test_fusion_order_decides_rrf_ties():
    """Eq. 3: base_first (default, pseudocode rrf(base_passages + expanded_passages)) vs expanded_first."""
    from gear_repro.methods.gear.expansion import NaiveGE, SyncGE
    from gear_repro.types import Ranking
    from tests.helpers.doubles import ScriptedLLM

    base, expanded = Ranking(["a", "b"], [2.0, 1.0]), ["x", "b", "y"]
    assert NaiveGE(None, None).fusion_order == SyncGE(None, None, None, ScriptedLLM(), {}).fusion_order == "base_first"
    assert NaiveGE(None, None).fuse(expanded, base).ids == ["b", "a", "x", "y"]
    assert NaiveGE(None, None, fusion_order="expanded_first").fuse(expanded, base).ids == ["b", "x", "a", "y"]
    with pytest.raises(ConfigError, match="fusion_order"):
        NaiveGE(None, None, fusion_order="sideways")


def test_fusion_order_default_in_configs(compose):
    for name in ("naive", "sync"):
        assert compose([f"expansion={name}"]).expansion.fusion_order == "base_first"


def test_k_dependence_and_vector_needs_come_from_classes(compose):
    """Derived from the classes the config names, not from display names."""
    from gear_repro.methods.gear.expansion import NaiveGE, NoExpansion
    from gear_repro.methods.single import SingleStep
    from gear_repro.pipeline.resources import Resources

    bm25 = type("R", (), {"k_dependent": False})()
    assert SingleStep(bm25, NoExpansion()).k_dependent is False
    assert SingleStep(bm25, NaiveGE(None, None)).k_dependent is True
    needs = {o: Resources(compose(o.split())).needs_vectors for o in (
        "retriever=bm25 expansion=none", "retriever=bm25 expansion=none expansion.name=naive",
        "retriever=bm25 expansion=naive expansion.name=none", "retriever=sbert expansion=none",
        "retriever=bm25 expansion=none agent=gear")}
    assert needs == {"retriever=bm25 expansion=none": False, "retriever=bm25 expansion=none expansion.name=naive": False,
                     "retriever=bm25 expansion=naive expansion.name=none": True, "retriever=sbert expansion=none": True,
                     "retriever=bm25 expansion=none agent=gear": True}


# -- fast (cascade) scorer --------------------------------------------------------------------------------

def _beams(graph, scorer, **cfg):
    index, _ = graph
    res = beam_search("q", [t.id for t in TRIPLES], index, scorer, BeamConfig(**cfg))
    return [(ids(index, b), round(b.score, 9)) for b in res.beams]


def test_fast_scorer_with_enough_rescoring_is_exact(graph):
    index, emb = graph
    exact = _beams(graph, ExactScorer(index, emb), length=2, width=2, gamma=2)
    fast = CascadeScorer(index, emb, CascadeOptions(rescore=100))
    assert _beams(graph, fast, length=2, width=2, gamma=2) == exact
    assert fast.stats["paths_rescored"] == 4  # t1->t2, t1->t3, t1->t8, t4->t5


def test_fast_scorer_without_rescoring_is_the_cheap_score(graph):
    index, emb = graph
    cheap = _beams(graph, SumScorer(index, emb), length=2, width=2, gamma=2)
    emb.calls.clear()
    assert _beams(graph, CascadeScorer(index, emb, CascadeOptions(rescore=0)), length=2, width=2, gamma=2) == cheap
    assert emb.calls == [["q"]]  # nothing but q was encoded


def test_fast_scorer_rescores_the_top_by_accumulated_cheap_score_and_memoises(graph):
    index, emb = graph
    fast = CascadeScorer(index, emb, CascadeOptions(rescore=2))
    qv = np.array([1.0, 0.0], dtype=np.float32)
    r = index.row
    paths = [(r["t1"], r["t2"]), (r["t1"], r["t3"]), (r["t4"], r["t5"])]
    prior = np.array([.9, .9, .8])
    cheap = SumScorer(index, emb).paths(qv, paths)
    emb.calls.clear()
    got = fast.paths(qv, paths, prior)
    top2 = np.argsort(-(cheap + prior), kind="stable")[:2]
    assert sorted(top2.tolist()) == [0, 1]  # t1->t2, t1->t3 have the highest s + cheap score
    assert got[0] == pytest.approx(PATH[("t1", "t2")]) and got[1] == pytest.approx(PATH[("t1", "t3")])
    shift = np.median([PATH[("t1", "t2")] - cheap[0], PATH[("t1", "t3")] - cheap[1]])
    assert got[2] == pytest.approx(cheap[2] + shift)  # the cheap score, moved onto the exact scale
    assert len(emb.calls) == 1 and len(emb.calls[0]) == 2
    fast.paths(qv, paths, prior)  # the second pass (another k) hits the memo
    assert len(emb.calls) == 1 and fast.stats["paths_memo_hits"] == 2
    fast.clear()
    fast.paths(qv, paths, prior)
    assert len(emb.calls) == 2


def test_fast_scorer_options(graph):
    index, emb = graph
    s = scorer_for(BeamConfig(scorer="fast", path_separator=" | ", scorer_options={"rescore": 3}), index, emb)
    assert isinstance(s, CascadeScorer) and s.separator == " | " and s.rescore == 3
    with pytest.raises(ConfigError, match=r"beam.scorer_options.approx must be one of \['sum', 'mean'\]"):
        CascadeOptions(approx="median")
    with pytest.raises(ConfigError, match="beam.scorer_options.rescore"):
        CascadeOptions(rescore=-1)
    with pytest.raises(ConfigError, match="beam.scorer_options.batch_size"):
        scorer_options("exact", {"batch_size": 0})
    # a key the chosen scorer does not take is named, with the scorer's own options (found at start-up: preflight)
    with pytest.raises(ConfigError, match=r"beam.scorer_options.rescore is not a setting of beam.scorer_options "
                                          r"\(the 'exact' scorer; its settings: batch_size, cuda_batch_size, reuse_triple_vectors, "
                                          r"triple_pieces\)"):
        scorer_options("exact", {"rescore": 3})
    with pytest.raises(ConfigError, match="'mean' scorer; it takes none\\)"):
        scorer_options("mean", {"batch_size": 8})
    assert scorer_options("fast", {"approx": "mean"}).approx is ApproxScore.mean


def test_fast_scorer_margin_widens_the_rescored_set(graph):
    index, emb = graph
    qv = np.array([1.0, 0.0], dtype=np.float32)
    r = index.row
    paths = [(r["t1"], r["t2"]), (r["t1"], r["t3"]), (r["t4"], r["t5"])]
    prior = np.array([.9, .9, .8])
    total = SumScorer(index, emb).paths(qv, paths) + prior
    gap = float(np.sort(total)[-1] - np.sort(total)[0])  # last rescored (rescore=1) minus the lowest
    wide = CascadeScorer(index, emb, CascadeOptions(rescore=1, margin=gap + 1e-6, rescore_max=3))
    wide.paths(qv, paths, prior)
    assert wide.stats["paths_rescored"] == 3
    capped = CascadeScorer(index, emb, CascadeOptions(rescore=1, margin=gap + 1e-6, rescore_max=2))
    capped.paths(qv, paths, prior)
    assert capped.stats["paths_rescored"] == 2
    with pytest.raises(ConfigError, match="rescore_max >= rescore"):
        CascadeOptions(rescore=5, rescore_max=4)


def test_a_triples_text_is_triple_text_of_its_parts() -> None:
    """``Triple.text`` formats its parts directly (the exact scorer's path texts are built from it) and must stay
    the text every index embeds, ``triple_text``: on the bundled sample's 17,204 triples, and on parts that are not
    strings."""
    from pathlib import Path

    from gear_repro.data import load_triples
    from gear_repro.types import triple_text

    triples = load_triples(Path(__file__).resolve().parent.parent / "data" / "musique_sample" / "triples.jsonl")
    assert len(triples) > 17_000 and all(t.text == triple_text(t.as_tuple()) for t in triples)
    odd = Triple("x", 1986, "held in", 2.5, "p")  # type: ignore[arg-type]  (a loader's JSON numbers)
    assert odd.text == triple_text(odd.as_tuple()) == "1986 held in 2.5"
