"""A sweep's plan before it runs (gear_repro/pipeline/plan.py, ``gear-repro-plan``): every preset's plan composes; a
run's LLM figures are the runner's own estimate of the same config, the totals their sums; encodes shared by
runs are counted once; a model without a list price says so. No encoder, no LLM."""

from __future__ import annotations

import pytest

from gear_repro.api import compose
from gear_repro.cli.plan import main
from gear_repro.data.dataset import load_dataset
from gear_repro.pipeline import capacity
from gear_repro.pipeline.estimate import planned_calls, question_estimate
from gear_repro.pipeline.plan import all_presets, estimate_llm, expand, markdown, plan_sweep

SAMPLE = ["dataset=musique_sample", "dataset.limit=5"]


@pytest.mark.parametrize("preset", all_presets())
def test_every_preset_plans_on_the_paper_data(preset: str) -> None:
    plan = plan_sweep(preset, [f"experiment={preset}", "dataset=musique"], compose)
    assert plan.runs and len(plan.runs) == len(expand([f"experiment={preset}", "dataset=musique"]))
    for run in plan.runs:
        assert run.questions > 0 and "paper sizes" in run.data
        assert run.calls is None or run.calls >= 0
    assert f"total: {len(plan.runs)} runs" in markdown(plan)


def test_sweep_is_hydras_cartesian_product_and_the_command_line_wins() -> None:
    runs = expand(["experiment=table2_single_step", "retriever=bm25,sbert"])
    assert len(runs) == 2 * 3
    assert {tuple(o for o in r if o.startswith(("retriever=", "expansion="))) for r in runs} == \
        {(f"retriever={r}", f"expansion={e}") for r in ("bm25", "sbert") for e in ("none", "naive", "sync")}


def test_run_figures_are_the_runners_estimate_and_totals_their_sums() -> None:
    plan = plan_sweep("table2_baselines", ["experiment=table2_baselines", "llm=openai", *SAMPLE], compose)
    assert len(plan.runs) == 3
    for run in plan.runs:
        cfg = compose("experiment=table2_baselines", "llm=openai", *SAMPLE, *run.overrides)
        ds = load_dataset(cfg.dataset.path, limit=5, triples_file=None)
        est = question_estimate(cfg, ds.questions, ds.passages, estimate_llm(cfg))
        assert run.data.startswith("prepared data") and run.questions == 5
        assert (run.calls, run.prompt_tokens, run.completion_tokens) == \
            (est.calls, est.prompt_tokens, est.completion_tokens)
        assert run.usd == pytest.approx(est.usd) and "gpt-4o-mini list price" in run.price
        assert run.question_hours["cpu"] == pytest.approx(est.wall_s / 3600)  # no measured retrieval time for these
    totals = plan.totals()
    assert totals["calls"] == sum(r.calls for r in plan.runs)
    assert totals["prompt_tokens"] == sum(r.prompt_tokens for r in plan.runs)
    assert totals["usd"] == pytest.approx(sum(r.usd for r in plan.runs))
    assert totals["questions"] == 15 and totals["runs"] == 3


def test_paper_sizes_scale_the_calls_to_the_question_count() -> None:
    plan = plan_sweep("gear", ["agent=gear", "dataset=hotpotqa"], compose)
    (run,) = plan.runs
    cfg = compose("agent=gear", "dataset=hotpotqa")
    assert run.questions == 1000
    assert run.calls == 1000 * sum(p.calls for p in planned_calls(cfg))


def test_encodes_shared_by_runs_are_counted_once() -> None:
    plan = plan_sweep("t", ["experiment=table2_baselines", *SAMPLE], compose)
    hipporag, ircot, hipporag_ircot = plan.runs
    assert hipporag.encodes and not any(e.shared for e in hipporag.encodes)
    assert not ircot.encodes  # IRCoT (BM25) embeds nothing
    assert [e.collection for e in hipporag_ircot.encodes] == [e.collection for e in hipporag.encodes]
    assert all(e.shared for e in hipporag_ircot.encodes) and hipporag_ircot.new_disk == 0
    totals = plan.totals()
    assert totals["encodes"] == len(hipporag.encodes)
    assert totals["disk"] == hipporag.new_disk == hipporag.disk
    assert totals["memory"] == max(r.memory for r in plan.runs if r.memory is not None)


def test_a_collection_searched_by_bm25_alone_is_not_planned_as_an_encode() -> None:
    """BM25 + NaiveGE reads the triples' vectors, never the passages' (wiring.vectors_read): one encode, and the
    disk of the triples' alone; Hybrid + NaiveGE encodes both."""
    bm25, hybrid = plan_sweep("t", ["retriever=bm25,hybrid", "expansion=naive", *SAMPLE], compose).runs
    assert [e.collection for e in bm25.encodes] == ["triples"]
    assert [e.collection for e in hybrid.encodes] == ["passages", "triples"]
    dim = capacity.embedder_dim(compose("retriever=hybrid").embedder)
    assert hybrid.disk - bm25.disk == 2 * hybrid.encodes[0].rows * dim * 4  # float32, twice while assembled
    assert hybrid.new_disk == hybrid.disk - bm25.disk  # the triples' encode is the first run's


def test_a_model_without_list_price_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment=table2_baselines", "llm=local", *SAMPLE]) == 0
    out = capsys.readouterr().out
    assert "no list price for qwen2.5-coder-1.5b-instruct-q4_k_m" in out
    assert "| no list price |" in out


def test_single_step_syncge_reads_are_planned() -> None:
    cfg = compose("agent=single", "expansion=sync", "run.ks=[5,10,15]", "run.matched_k=true")
    assert [(p.template, p.calls, p.passages) for p in planned_calls(cfg)] == \
        [("reader", 1, 5), ("reader", 1, 10), ("reader", 1, 15)]
    cfg = compose("agent=single", "expansion=sync", "run.ks=[5,10,15]", "run.matched_k=false")
    assert [(p.calls, p.passages) for p in planned_calls(cfg)] == [(1, 15)]
    assert planned_calls(compose("agent=single", "expansion=naive")) == []


def test_a_plan_names_the_settings_that_need_less_memory() -> None:
    """GRIEVER at 2Wiki's size: the start-up check's hint (its name matrix not read whole) reaches the plan, and
    planning with that setting needs less memory."""
    (run,) = plan_sweep("g", ["retriever=griever", "dataset=2wiki"], compose).runs
    # GRIEVER searches its passages in its own store, so no faiss index is built, none counted, none to leave out
    assert [h.split(" ", 1)[0] for h in run.hints] == ["retriever.same_as.max_aliases=0"]
    assert f"less memory (the run): {run.hints[0]}" in markdown(plan_sweep("g", ["retriever=griever", "dataset=2wiki"], compose))
    (fewer,) = plan_sweep("g", ["retriever=griever", "dataset=2wiki", "retriever.same_as.max_aliases=0"], compose).runs
    assert fewer.memory < run.memory and not fewer.hints
    (dense,) = plan_sweep("s", ["retriever=sbert", "dataset=2wiki"], compose).runs  # 490,454 passages: faiss
    assert [h.split(" ", 1)[0] for h in dense.hints] == ["backend.dense.index=exact"]
    (small,) = plan_sweep("h", ["retriever=hybrid", "dataset=hotpotqa"], compose).runs  # 10,293 passages: exact
    assert small.hints == []


def test_multi_step_plans_count_the_calls_their_loops_make() -> None:
    """IRCoT thinks after each round but the last (``max_rounds`` retrievals, ``max_rounds - 1`` thoughts:
    tests/test_ircot.py ``test_round_limit_and_prompt_contents``); HippoRAG v1 runs its query NER at every search, v2
    calls no LLM (its plan is empty, so no estimate is said)."""
    from gear_repro.pipeline.estimate import question_plan

    assert question_plan(compose("agent=ircot", "retriever=bm25", "dataset.max_rounds=3")) == [("ircot", 2, 10)]
    assert question_plan(compose("agent=ircot", "retriever=bm25", "dataset.max_rounds=1")) == []
    assert question_plan(compose("agent=hipporag_ircot")) == [("hipporag_ner", 4, 0), ("ircot", 3, 10)]
    assert question_plan(compose("agent=hipporag_ircot", "hipporag.version=v2")) == [("ircot", 3, 10)]
    assert question_plan(compose("agent=hipporag")) == [("hipporag_ner", 1, 0)]
    cfg = compose("agent=hipporag", "hipporag.version=v2", *SAMPLE)
    assert question_plan(cfg) == [] and question_estimate(cfg, load_dataset(cfg.dataset.path, limit=5,
                                                                            triples_file=None).questions, [], None) is None
