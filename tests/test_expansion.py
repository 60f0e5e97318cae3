"""NaiveGE / SyncGE (GEAR §4, §6.3) on a real slice of the bundled MuSiQue sample with all-MiniLM-L6-v2.

The slice: the first 200 passages (the paragraphs of the first ~10 questions), their GPT-3.5 triples,
BM25 + dense indexes from the memory backend. SyncGE reads with a scripted stand-in LLM; the prompt
renderer and the triple parser are the real ones (gear_repro.prompts, gear_repro.llm.parsing).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.requirements import missing, require_module

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.memory import MemoryBackend  # noqa: E402
from gear_repro.core.fusion import rrf  # noqa: E402
from gear_repro.core.triple_graph import TripleIndex, triple_docs  # noqa: E402
from gear_repro.data import load_dataset  # noqa: E402
from gear_repro.data.dataset import Dataset  # noqa: E402
from gear_repro.llm.ledger import tags  # noqa: E402
from gear_repro.methods.gear.expansion import NaiveGE, NoExpansion, SyncGE  # noqa: E402
from gear_repro.retrieval.base import HybridRetriever  # noqa: E402
from gear_repro.types import Ranking  # noqa: E402
from tests.helpers.doubles import ScriptedLLM  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "musique_sample"
N_PASSAGES = 200
NO_TRIPLES = "3"  # its triples are left out of the slice to create a passage without triples
BEAM = {"length": 2, "width": 10, "neighbours": 100, "gamma": 20, "diversity": True, "scorer": "exact"}
FAST = {**BEAM, "scorer": "sum"}  # same search, approximate scorer: keeps the slow exact encodes to a few tests

pytestmark = pytest.mark.slow


def _embedder():
    require_module("sentence_transformers", "make test-deps")
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("all-MiniLM-L6-v2 not installed offline (make install-test-models)")
    return SentenceEmbedder(model="all-MiniLM-L6-v2", show_progress=False)


@pytest.fixture(scope="module")
def res():
    if not (SAMPLE / "triples.jsonl").exists():
        missing("bundled MuSiQue sample not prepared")
    full = load_dataset(SAMPLE)
    passages = full.passages[:N_PASSAGES]
    keep = {p.id for p in passages}
    triples = [t for t in full.triples or [] if t.passage_id in keep and t.passage_id != NO_TRIPLES]
    questions = [q for q in full.questions if set(q.gold_ids) <= keep]
    ds = Dataset(name="musique_slice", path=SAMPLE, passages=passages, questions=questions, triples=triples)
    emb = _embedder()
    backend = MemoryBackend()
    pcoll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in passages], emb)
    tcoll = backend.open_collection("triples", triple_docs(triples), emb)
    index = TripleIndex(tcoll, triples)
    return SimpleNamespace(dataset=ds, embedder=emb, passages=pcoll, passage_retriever=HybridRetriever(pcoll, emb),
                           triples=tcoll, triple_retriever=HybridRetriever(tcoll, emb), triple_index=index)


def _spo_text(triples) -> str:
    return "Facts: " + ", ".join(f'("{t.subject}", "{t.predicate}", "{t.object}")' for t in triples)


# -- NaiveGE ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("beam", [BEAM, FAST], ids=["exact", "sum"])
def test_naive_on_real_slice(res, beam):
    ge = NaiveGE(res.triple_index, res.embedder, beam=beam)
    assert len(res.dataset.questions) >= 5
    for q in res.dataset.questions[: 1 if beam is BEAM else 5]:
        base = res.passage_retriever.retrieve(q.question, 10)
        out = ge.expand(q.question, base)
        ids = out.ranking.ids
        assert ids and set(base.ids) <= set(ids)  # base passages retained
        assert len(ids) == len(set(ids))
        tr = out.trace
        assert out.ranking.ids == rrf([base, tr["expanded"]]).ids  # Eq. 3, base list first (fusion_order)
        assert tr["initial_triples"] == sum(len(res.triple_index.triples_of_passage(p)) for p in base.ids)
        assert 0 < len(tr["beams"]) <= 10 and tr["beam_steps"] == 1
        b0 = tr["beams"][0]
        assert len(b0["texts"]) == 2 and b0["texts"][0] == res.triple_index.text(b0["triples"][0])
        scores = [b["score"] for b in tr["beams"]]
        assert scores == sorted(scores, reverse=True)
        # expanded list = breadth-first passages of the beams, de-duplicated
        bf = [b["passages"][i] for i in range(2) for b in tr["beams"] if i < len(b["passages"])]
        assert tr["expanded"] == list(dict.fromkeys(bf))
        assert tr["counters"]["candidates"] > 0
        assert {"gather_s", "score_s", "fusion_s"} <= set(tr["timings"])


def test_naive_recovers_gold_beyond_base(res):
    """On the slice, expansion must bring in some gold passage the base top-5 missed (sanity, not a metric)."""
    ge = NaiveGE(res.triple_index, res.embedder, beam=FAST)
    gained = 0
    for q in res.dataset.questions:
        base = res.passage_retriever.retrieve(q.question, 5)
        out = ge.expand(q.question, base)
        gained += len((set(out.trace["expanded"]) - set(base.ids)) & set(q.gold_ids))
    assert gained > 0


def test_naive_passage_without_triples(res):
    ge = NaiveGE(res.triple_index, res.embedder, beam=BEAM)
    q = res.dataset.questions[0]
    base = Ranking([NO_TRIPLES, "6", "10"], [3.0, 2.0, 1.0])
    out = ge.expand(q.question, base)
    assert out.trace["counters"]["passages_without_triples"] == 1
    assert set(base.ids) <= set(out.ranking.ids)
    only = Ranking([NO_TRIPLES], [1.0])
    out = ge.expand(q.question, only)
    assert out.ranking.ids == [NO_TRIPLES]
    assert out.trace["counters"]["no_initial_triples"] == 1 and out.trace["counters"]["empty_expansion"] == 1
    assert ge.expand(q.question, Ranking()).ranking.ids == []


def test_naive_hub_entities_capped(res):
    capped = TripleIndex(res.triples, res.dataset.triples, max_degree=3)
    assert capped.stats["hub_entities"] > 0
    ge = NaiveGE(capped, res.embedder, beam=FAST)
    hits = 0
    for q in res.dataset.questions[:5]:
        base = res.passage_retriever.retrieve(q.question, 10)
        out = ge.expand(q.question, base)
        assert set(base.ids) <= set(out.ranking.ids)
        hits += out.trace["counters"].get("hub_entities_capped", 0)
    assert hits > 0


def test_scorers_agree_on_first_beam(res):
    """The sum approximation keeps the B0 scores (single triples) and mostly agrees on the path ranking."""
    q = res.dataset.questions[0]
    base = res.passage_retriever.retrieve(q.question, 10)
    exact = NaiveGE(res.triple_index, res.embedder, beam=BEAM).expand(q.question, base).trace
    approx = NaiveGE(res.triple_index, res.embedder, beam={**BEAM, "scorer": "sum"}).expand(q.question, base).trace
    assert exact["initial_triples"] == approx["initial_triples"]
    overlap = set(exact["expanded"]) & set(approx["expanded"])
    assert len(overlap) >= len(exact["expanded"]) // 2


def test_no_expansion(res):
    base = Ranking(["1", "2"], [2.0, 1.0])
    out = NoExpansion().expand("q", base)
    assert out.ranking is base and NoExpansion().name == "none"


# -- SyncGE ---------------------------------------------------------------------------------------------

def _sync(res, replies, **kw):
    llm = ScriptedLLM(replies)
    return SyncGE(res.triple_index, res.embedder, res.triple_retriever, llm, res.dataset.passage_by_id,
                  beam=kw.pop("beam", FAST), **kw), llm


def test_sync_reads_links_and_expands(res):
    q = res.dataset.questions[0]
    base = res.passage_retriever.retrieve(q.question, 5)
    gold_triples = [t for t in res.dataset.triples if t.passage_id in q.gold_ids][:3]
    ge, llm = _sync(res, [_spo_text(gold_triples)], beam=BEAM)
    out = ge.expand(q.question, base)
    # one read call, K.2 reader prompt over the base passages in QA format
    assert len(llm.calls) == 1 and llm.calls[0]["stage"] == "read" and llm.calls[0]["round"] == 0
    prompt = llm.calls[0]["messages"][0]["content"]
    first = res.dataset.passage_by_id[base.ids[0]]
    assert f"Wikipedia Title: {first.title}\n{first.text}" in prompt and q.question in prompt
    tr = out.trace
    assert tr["proximal"] == [list(t.as_tuple()) for t in gold_triples]
    # tripleLink: an exact copy of an indexed triple links to a triple with the same text
    for link, t in zip(tr["linked"], gold_triples, strict=True):
        assert link["triple"] is not None and link["triple_text"] == t.text
    assert tr["counters"]["proximal_triples"] == 3
    assert set(base.ids) <= set(out.ranking.ids) and tr["expanded"]
    assert set(q.gold_ids) & set(out.ranking.ids)


def test_sync_reader_question_is_a_parameter(res):
    """The method passes the reader's question (read_query) and the memory; beams use ``query``."""
    q = res.dataset.questions[0]
    base = res.passage_retriever.retrieve(q.question, 5)
    ge, llm = _sync(res, ["", ""])
    with tags(round=2):  # the agent's round (ledger.tags) reaches the reader's call
        ge.expand("a rewritten query", base, read_query=q.question)
    with tags(round=3):
        ge.expand("a rewritten query", base, read_query=q.question, memory=[("A", "b", "C")])
    plain, with_memory = (c["messages"][0]["content"] for c in llm.calls)
    assert [c["round"] for c in llm.calls] == [2, 3]
    assert f"Question: {q.question}" in plain and "a rewritten query" not in plain + with_memory
    assert "preliminary facts" not in plain and '("A", "b", "C")' in with_memory


def test_sync_no_proximal_triples(res):
    q = res.dataset.questions[1]
    base = res.passage_retriever.retrieve(q.question, 5)
    ge, _ = _sync(res, ["I cannot find any facts."])
    out = ge.expand(q.question, base)
    assert out.ranking.ids == base.ids  # RRF of the base list alone keeps its order
    c = out.trace["counters"]
    assert c["no_proximal_triples"] == 1 and c["no_initial_triples"] == 1 and c["empty_expansion"] == 1
    ge, _ = _sync(res, [""], on_no_proximal="naive")
    out = ge.expand(q.question, base)
    assert out.trace["counters"]["naive_fallback"] == 1 and out.trace["expanded"]


def test_sync_linked_triple_without_neighbours(res):
    index = res.triple_index
    isolated = next(index.triples[t] for t in index.ids if index.neighbour_rows(index.row[t]).size == 0)
    q = res.dataset.questions[2]
    base = res.passage_retriever.retrieve(q.question, 5)
    ge, _ = _sync(res, [_spo_text([isolated])])
    out = ge.expand(q.question, base)
    c = out.trace["counters"]
    assert out.trace["linked"][0]["triple_text"] == isolated.text
    assert c["linked_without_neighbours"] >= 1
    assert out.trace["linked"][0]["neighbours"] == 0 and c["initial_triples"] == 1
    assert c["beam_stalled"] == 1 and out.trace["expanded"] == [isolated.passage_id]
    assert set(base.ids) <= set(out.ranking.ids)


def test_sync_empty_base_skips_llm(res):
    ge, llm = _sync(res, ["unused"])
    out = ge.expand("anything", Ranking())
    assert out.ranking.ids == [] and llm.calls == []


def test_wired_from_configs(res):
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.wiring import build_expansion
    from tests.helpers.runs import compose_config

    given = {name: getattr(res, name) for name in ("dataset", "embedder", "passages", "triples", "triple_index")}
    for name, cls in (("none", NoExpansion), ("naive", NaiveGE), ("sync", SyncGE)):
        cfg = compose_config([f"expansion={name}", "retriever=hybrid", "beam=default"])
        obj = build_expansion(Resources(cfg, **given, llm=ScriptedLLM([])))
        assert isinstance(obj, cls) and obj.name == name
    naive = build_expansion(Resources(compose_config(["expansion=naive", "beam=default"]), **given))
    assert naive.beam.gamma_value == 20 and naive.beam.width == 10 and naive.beam.length == 2
