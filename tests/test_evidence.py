"""Claims scoreboard, paired-run refusal, CI columns, cost table and recorded subsets on synthetic runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gear_repro.cli.report import main as report_main
from gear_repro.evaluation.per_question import call_counts, question_values, timing
from gear_repro.reporting.claims import (
    VERDICTS,
    claims_markdown,
    decide,
    evaluate_claims,
    load_claims,
    matches,
)
from gear_repro.reporting.cost import cost_table, load_prices
from gear_repro.reporting.evidence import EvidenceOptions, QuestionSetMismatch, paired
from gear_repro.reporting.paper import paper_value
from gear_repro.reporting.runs import find_runs, load_predictions
from gear_repro.reporting.tables import long_table
from tests.helpers.paper_setting import put_on_paper_setting

CLASSES = {"bm25": "gear_repro.retrieval.BM25Retriever", "sbert": "gear_repro.retrieval.DenseRetriever",
           "hybrid": "gear_repro.retrieval.HybridRetriever", "griever": "gear_repro.methods.griever.GrieverRetriever",
           "composed": "gear_repro.retrieval.ComposedRetriever"}
EXPANSIONS = {"none": "gear_repro.methods.gear.expansion.NoExpansion", "naive": "gear_repro.methods.gear.expansion.NaiveGE",
              "sync": "gear_repro.methods.gear.expansion.SyncGE"}


def make_run(root: Path, name: str, ret: str, exp: str, hits: list[int], agent: str = "SingleStep",
             embedder: str = "all-MiniLM-L6-v2", label: str | None = None, ids: list[int] | None = None,
             qa_mode: str | None = None, answers_right: list[bool] | None = None, llm_calls=None) -> Path:
    """A finished run dir: question i has 2 gold passages, ``hits[i]`` of them in the top 5."""
    run = root / name
    run.mkdir(parents=True)
    preds = []
    for j, i in enumerate(ids if ids is not None else range(len(hits))):
        gold = [f"g{i}a", f"g{i}b"]
        ranking = gold[: hits[j]] + [f"x{i}-{m}" for m in range(20)]
        rec = {"id": f"q{i}", "gold_ids": gold, "answers": ["yes sir"], "type": "2hop",
               "rankings": {"final": ranking}, "timings": {"total_s": 0.01 * (1 + i % 3)}}
        if answers_right is not None:
            rec["answer"] = "yes sir" if answers_right[j] else "no"
        if llm_calls is not None:
            rec["llm_calls"] = llm_calls
        preds.append(rec)
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (run / "metrics.json").write_text(json.dumps({"recall@5": 0.0, "n_questions": len(preds)}))
    cfg = {"dataset": {"name": "musique_sample", "paper_name": "MuSiQue", "max_rounds": 4},
           "retriever": {"_target_": CLASSES[ret], "name": ret},
           "expansion": {"_target_": EXPANSIONS[exp], "name": exp},
           "agent": {"_target_": f"gear_repro.pipeline.wiring.x.{agent}", "name": agent.lower()},
           "embedder": {"model": embedder}, "beam": {"diversity": True, "length": 2, "width": 10},
           "llm": {"model": "m"}, "report": {"method": label} if label else {}, "qa": answers_right is not None}
    if qa_mode:
        cfg["qa_reader"] = {"mode": qa_mode}
    (run / "config.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    return run


N = 40
BETTER = [2] * 30 + [1] * 10  # vs BASE: +50 on 30 questions, 0 on 10
BASE = [1] * 30 + [1] * 10
WORSE = [0] * 30 + [1] * 10


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    make_run(root, "bm25", "bm25", "none", BASE)
    make_run(root, "bm25_naive", "bm25", "naive", BETTER, label="GEAR")  # a label must not make it GEAR
    make_run(root, "hybrid", "hybrid", "none", BASE)
    make_run(root, "hybrid_naive", "hybrid", "naive", WORSE)
    make_run(root, "sbert", "sbert", "none", BASE)
    make_run(root, "sbert_naive", "sbert", "naive", BASE)  # identical values: interval at 0, p = 1
    make_run(root, "sbert_naive_mpnet", "sbert", "naive", BETTER, embedder="all-mpnet-base-v2")  # never paired
    return root


def rows_by(rows, claim, metric="R@5"):
    return next(r for r in rows if r.claim == claim and r.metric == metric)


def test_scoreboard_verdicts(runs: Path):
    rows = evaluate_claims(find_runs([runs]), load_claims(), EvidenceOptions(resamples=1000))
    bm25 = rows_by(rows, "naivege_gt_base[BM25]")
    assert bm25.verdict == "holds" and bm25.n == N and bm25.diff == pytest.approx(37.5)
    assert bm25.low > 0 and bm25.p_value < 0.01
    assert (bm25.paper_a, bm25.paper_b) == (37.5, 33.8)  # Table 2 MuSiQue R@5: BM25 + NaiveGE vs BM25
    assert bm25.paper_diff == pytest.approx(3.7)
    assert rows_by(rows, "naivege_gt_base[Hybrid]").verdict == "contradicted"
    sbert = rows_by(rows, "naivege_gt_base[SBERT]")
    assert sbert.verdict == "inconclusive" and sbert.p_value == 1.0 and (sbert.low, sbert.high) == (0.0, 0.0)
    assert "sbert_naive_mpnet" not in sbert.run_a  # other embedder: not paired
    # roles by config class, not label: the run labelled "GEAR" is a SingleStep run, so GEAR claims have no runs
    gear = [r for r in rows if r.claim.startswith("gear_")]
    assert gear and all(r.verdict == "no runs" for r in gear)
    assert rows_by(rows, "griever_gt_rrf_hybrid").verdict == "no runs"
    assert rows_by(rows, "t2rag_gt_standard_rag", "EM").verdict == "no runs"
    assert rows_by(rows, "syncge_gt_naivege[BM25]").note == "no run for role a"


def test_scoreboard_counts_the_lines_it_lists(runs: Path):
    rows = evaluate_claims(find_runs([runs]), load_claims(), EvidenceOptions(resamples=200))
    md = claims_markdown(rows, EvidenceOptions(resamples=200))
    listed = [line.split(" | ")[3].strip("*") for line in md.splitlines()
              if line.startswith("| ") and not line.startswith("| claim |")]
    summary = next(line for line in md.splitlines() if line.startswith("Lines by verdict: "))
    for verdict in VERDICTS:
        assert f"{verdict} {listed.count(verdict)}" in summary, (verdict, summary)
    untested = sum(r.verdict == "no runs" for r in rows)
    assert listed.count("no runs") < untested  # several metrics of a claim and dataset share a line
    assert f"(holding {untested} dataset × metric rows, one line per claim, dataset and reason)" in summary


def test_paper_difference_and_needed_n(runs: Path):
    rows = evaluate_claims(find_runs([runs]), load_claims(), EvidenceOptions(resamples=500))
    r = rows_by(rows, "naivege_gt_base[BM25]", "R@15")
    assert (r.paper_a, r.paper_b) == (48.4, 41.3) and r.paper_diff == pytest.approx(7.1)
    # differences: +50 on 30 questions, 0 on 10 -> mean 37.5, sd = sqrt(30*12.5^2 + 10*37.5^2)/sqrt(39)
    sd = ((30 * 12.5**2 + 10 * 37.5**2) / 39) ** 0.5
    assert r.sd == pytest.approx(sd)
    assert r.n_needed == max(6, -(-((1.959964 + 0.841621) * sd / 37.5) ** 2 // 1))  # 6: the sign-flip floor


def test_decide_directions():
    assert decide(5, 1, 9, 0.01, "greater", 0.05) == "holds"
    assert decide(-5, -9, -1, 0.01, "greater", 0.05) == "contradicted"
    assert decide(-5, -9, -1, 0.01, "less", 0.05) == "holds"
    assert decide(5, 1, 9, 0.2, "greater", 0.05) == "inconclusive"  # interval and test must agree
    assert decide(1, -2, 4, 0.5, "greater", 0.05) == "inconclusive"


def test_runs_on_other_data_are_noted_and_never_paired(tmp_path: Path):
    """The same question ids over another corpus (dataset.path overridden, dataset.name kept) sit in one column: the
    report says so and neither a paired test nor a claim pairs them, --intersect or not."""
    root = tmp_path / "runs"
    for name, exp, hits, corpus in (("bm25", "none", BASE, "c1"), ("bm25_naive", "naive", BETTER, "c2")):
        run = make_run(root, name, "bm25", exp, hits)
        (run / "run.json").write_text(json.dumps({"data_hashes": {"corpus": corpus, "questions": "q1"}}))
    runs = find_runs([root])
    naive = next(r for r in runs if r.path.name == "bm25_naive")
    assert any("run on different corpus files" in n and "not comparable" in n for n in naive.notes)
    with pytest.raises(QuestionSetMismatch, match="different corpus files"):
        paired(runs[0], runs[1], "R@5", EvidenceOptions(intersect=True))
    rows = evaluate_claims(runs, load_claims(), EvidenceOptions(resamples=200, intersect=True))
    r = rows_by(rows, "naivege_gt_base[BM25]")
    assert r.verdict == "refused" and "different corpus files" in r.note


def test_refuses_different_question_sets_unless_intersect(tmp_path: Path):
    root = tmp_path / "runs"
    make_run(root, "bm25", "bm25", "none", BASE)
    make_run(root, "bm25_naive", "bm25", "naive", BETTER[:20], ids=list(range(20, 40)) and list(range(20)))
    a, b = find_runs([root / "bm25_naive"])[0], find_runs([root / "bm25"])[0]
    with pytest.raises(QuestionSetMismatch, match="different question sets .*20 vs 40.*--intersect"):
        paired(a, b, "R@5")
    res, pairing = paired(a, b, "R@5", EvidenceOptions(intersect=True))
    assert res.n == 20 and pairing.dropped_b == 20
    rows = evaluate_claims(find_runs([root]), load_claims(), EvidenceOptions(resamples=200))
    assert rows_by(rows, "naivege_gt_base[BM25]").verdict == "refused"
    rows = evaluate_claims(find_runs([root]), load_claims(), EvidenceOptions(resamples=200, intersect=True))
    r = rows_by(rows, "naivege_gt_base[BM25]")
    assert r.verdict == "holds" and r.n == 20 and "left out" in r.note


def test_qa_bounds_and_roles(tmp_path: Path):
    root = tmp_path / "runs"
    gold = make_run(root, "gold", "hybrid", "none", BASE, qa_mode="gold", answers_right=[True] * 36 + [False] * 4)
    make_run(root, "gear", "hybrid", "sync", BASE, agent="GearAgent", answers_right=[True] * 20 + [False] * 20)
    make_run(root, "none", "hybrid", "none", BASE, qa_mode="none", answers_right=[True] * 20 + [False] * 20)
    rg = find_runs([gold])[0]
    assert matches(rg, {"qa_reader.mode": "gold"}) and not matches(rg, {"retriever._target_": "HybridRetriever"})
    assert matches(rg, {"retriever._target_": ["BM25Retriever", "HybridRetriever"], "qa_reader.mode": "gold"})
    rows = evaluate_claims(find_runs([root]), load_claims(), EvidenceOptions(resamples=500))
    up = rows_by(rows, "gold_gt_gear_qa", "EM")
    assert up.verdict == "holds" and up.diff == pytest.approx(40.0) and "gold" in up.run_a
    assert (up.paper_a, up.paper_b) == (36.6, 19.0)
    low = rows_by(rows, "gear_gt_no_passages_qa", "F1")
    assert low.verdict == "inconclusive" and low.diff == 0.0 and low.p_value == 1.0
    # the bounds are not retrieval runs: the Hybrid base role of NaiveGE's claim does not match them
    assert rows_by(rows, "naivege_gt_base[Hybrid]").note == "no run for role a and b"


def test_errored_questions_count_zero():
    preds = [{"id": "a", "gold_ids": ["g"], "rankings": {"final": ["g"]}, "answer": "x", "answers": ["x"]},
             {"id": "b", "gold_ids": ["g"], "rankings": {"final": []}, "error": "Boom"}]
    assert question_values(preds, "recall@5") == {"a": 100.0, "b": 0.0}
    assert question_values(preds, "em") == {"a": 100.0, "b": 0.0}


def test_recall_of_a_question_whose_qa_call_failed_is_one_number_everywhere():
    """Retrieval finished, then the QA call failed: metrics.json scored its ranking (R@5 25.0) and the report 0.0
    for the same questions. One rule: a recorded ranking is scored (R@k does not involve the reader); a question
    whose retrieval did not finish recorded none and counts 0."""
    from gear_repro.evaluation.aggregate import aggregate

    ranking = ["g1"] + [f"x{i}" for i in range(6)] + ["g2"]  # g1 at rank 1, g2 at rank 8
    preds = [{"id": "qa_failed", "gold_ids": ["g1", "g2"], "rankings": {"final": ranking}, "answers": ["y"],
              "error": "APIError: the QA call failed"},
             {"id": "missed", "gold_ids": ["g1", "g2"], "rankings": {"final": ["x"]}, "answer": "y", "answers": ["y"]},
             {"id": "retrieval_failed", "gold_ids": ["g1"], "rankings": {"final": []}, "answers": ["y"],
              "error": "APIError: the reader call failed"}]
    metrics = aggregate(preds, [5, 10], qa=True)
    for k, expected in ((5, {"qa_failed": 50.0, "missed": 0.0, "retrieval_failed": 0.0}),
                        (10, {"qa_failed": 100.0, "missed": 0.0, "retrieval_failed": 0.0})):
        values = question_values(preds, f"recall@{k}")
        assert values == expected
        assert metrics[f"recall@{k}"] == pytest.approx(sum(values.values()) / 3)
    assert metrics["recall@5"] == pytest.approx(50 / 3) and metrics["em"] == pytest.approx(100 / 3)


def test_tables_carry_intervals_and_n(runs: Path, tmp_path: Path):
    df = long_table(find_runs([runs]), opts=EvidenceOptions(resamples=300))
    row = df[(df.run_dir.str.endswith("bm25_naive")) & (df.metric == "R@5")].iloc[0]
    assert row.ours == pytest.approx(87.5) and row.ci_low < 87.5 < row.ci_high and row.n == N
    cols = list(df.columns)
    assert cols.index("ci_low") == cols.index("ours") + 1 and cols.index("ci_high") == cols.index("ours") + 2
    out = tmp_path / "rep"
    assert report_main([str(runs), "--out", str(out), "--claims", "--resamples", "300"]) == 0
    csv = pd.read_csv(out / "table.csv")
    assert {"ci_low", "ci_high", "n"} <= set(csv.columns) and csv["ci_low"].notna().all()
    md = (out / "table.md").read_text()
    assert "87.5 [" in md and "n=40" in md
    assert "n=40" in (out / "table.tex").read_text()
    claims = (out / "claims.md").read_text()
    assert "naivege_gt_base[BM25]" in claims and "**holds**" in claims and "**contradicted**" in claims
    assert "no runs" in claims and (out / "cost.md").exists()


def test_cost_uses_one_pass_at_one_k():
    calls = [{"stage": "read", "k": k, "prompt_tokens": 1000 * k, "completion_tokens": 10 * k, "latency_s": 1.0}
             for k in (5, 10, 15)] + [{"stage": "qa", "prompt_tokens": 500, "completion_tokens": 5, "latency_s": 2.0}]
    pred = {"id": "q", "rankings": {"5": [], "10": [], "15": [], "final": []}, "llm_calls": calls,
            "trace": {str(k): {"timings": {"base_s": 0.01, "expansion_s": 0.1 * k}} for k in (5, 10, 15)},
            "timings": {"total_s": 5.0}}
    c = call_counts(pred)
    assert c == {"calls": 2, "prompt_tokens": 15500, "completion_tokens": 155, "tokens": 15150}
    t = timing(pred)
    assert t["retrieval_s"] == pytest.approx(1.51)
    assert t["e2e_s"] == pytest.approx(5.0 - 0.51 - 1.01)
    untagged = {**pred, "llm_calls": [{k: v for k, v in x.items() if k != "k"} for x in calls]}
    u = call_counts(untagged)  # split evenly over the 3 passes; QA counted once
    assert u["calls"] == pytest.approx(2.0) and u["prompt_tokens"] == pytest.approx(30000 / 3 + 500)


def test_cost_table_dollars(tmp_path: Path):
    calls = [{"stage": "read", "prompt_tokens": 2000, "completion_tokens": 100, "latency_s": 0.002},
             {"stage": "qa", "prompt_tokens": 1000, "completion_tokens": 10, "latency_s": 0.001}]
    run = make_run(tmp_path / "r", "sync", "hybrid", "sync", BASE, llm_calls=calls)
    prices = load_prices()
    assert prices["model"] == "gpt-4o-mini" and prices["date"]
    df = cost_table(find_runs([run]), prices)
    r = df.iloc[0]
    assert r.llm_calls_per_q == 2 and r.input_tokens_per_q == 3000 and r.output_tokens_per_q == 110
    assert r.usd_per_1000_q == pytest.approx(1000 * (3000 * 0.15 + 110 * 0.60) / 1e6)
    ret = [1000 * (0.01 * (1 + i % 3) - 0.001) for i in range(N)]  # total minus the QA call
    assert r.retrieval_ms_p50 == pytest.approx(np.percentile(ret, 50))
    assert r.retrieval_ms_p95 == pytest.approx(np.percentile(ret, 95)) and r.e2e_s_mean == pytest.approx(0.01975)


def test_tokens_by_stage_averages_over_the_questions_that_did_not_error(tmp_path: Path):
    """tokens_by_stage divided the tokens of the finished questions by all of them, errored ones (no calls: 0)
    included, so a run with failures looked cheaper; it now averages as the cost table does and says how many
    questions it left out."""
    from gear_repro.reporting.analyses import tokens_table

    calls = [{"stage": "read", "prompt_tokens": 2000, "completion_tokens": 100},
             {"stage": "qa", "prompt_tokens": 1000, "completion_tokens": 10}]
    run = make_run(tmp_path / "r", "sync", "hybrid", "sync", BASE, llm_calls=calls)
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    for p in preds[:10]:
        p.update(error="LLMCallError: Connection refused", llm_calls=[])
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    tok = tokens_table(find_runs([run])).set_index("stage")
    cost = cost_table(find_runs([run]), load_prices()).iloc[0]
    assert list(tok["n_questions"]) == [N - 10] * 2 and list(tok["n_errored"]) == [10] * 2
    assert tok.loc["read", "calls_per_q"] == 1 and tok.loc["read", "prompt_per_q"] == 2000
    assert tok["prompt_per_q"].sum() == cost.input_tokens_per_q and cost.n_errored == 10


def test_stratified_subset_on_the_sample_is_stable_nested_and_balanced(sample_dir: Path):
    import random

    from gear_repro.data import load_dataset
    from gear_repro.data.subset import stratified_subset, stratum

    full = load_dataset(sample_dir, subset="stratified", triples_file=None).questions
    subsets = {n: load_dataset(sample_dir, limit=n, subset="stratified", triples_file=None) for n in (20, 40, 100)}
    ids = {n: [q.id for q in d.questions] for n, d in subsets.items()}
    assert set(ids[20]) < set(ids[40]) < set(ids[100]) and len(ids[100]) == 100
    counts = {s: sum(stratum(q) == s for q in subsets[20].questions) for s in ("2hop", "3hop", "4hop")}
    assert counts == {"2hop": 8, "3hop": 7, "4hop": 5}  # the sample has 68/27/5: all 4-hop ones are in
    shuffled = list(full)
    random.Random(7).shuffle(shuffled)
    assert {q.id for q in stratified_subset(shuffled, 20)} == set(ids[20])  # independent of file order
    assert load_dataset(sample_dir, limit=20, subset="stratified", triples_file=None).selection == subsets[20].selection
    assert {q.id for q in stratified_subset(full, 20, seed=1)} != set(ids[20])  # the seed matters
    sel = subsets[20].selection
    assert (sel["kind"], sel["seed"], sel["limit"], sel["size"], sel["of"]) == ("stratified", 0, 20, 20, 100)
    assert sel["ids"] == ids[20] and len(sel["ids_sha256"]) == 64


def test_run_json_records_the_subset(compose, toy_dir: Path, tmp_path: Path):
    from gear_repro.pipeline.runner import Runner

    recs = {}
    for name, extra in (("a", []), ("b", ["run.ks=[1,2]"]), ("c", ["dataset.limit=3"])):
        cfg = compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                       "dataset.subset=stratified", "dataset.limit=2", *extra])
        Runner(cfg, tmp_path / name).run()
        recs[name] = json.loads((tmp_path / name / "run.json").read_text())["subset"]
    assert recs["a"]["kind"] == "stratified" and recs["a"]["size"] == 2 and recs["a"]["seed"] == 0
    assert recs["a"]["ids"] == recs["b"]["ids"] and recs["a"]["ids_sha256"] == recs["b"]["ids_sha256"]
    assert set(recs["a"]["ids"]) < set(recs["c"]["ids"]) and recs["c"]["size"] == 3
    preds = [json.loads(x)["id"] for x in (tmp_path / "a" / "predictions.jsonl").read_text().splitlines()]
    assert preds == recs["a"]["ids"]


def test_error_bars_from_intervals():
    from gear_repro.evaluation.stats import Interval
    from gear_repro.reporting.figures import _yerr

    assert _yerr([Interval(50.0, 40.0, 70.0, 10), Interval(20.0, 20.0, 20.0, 10)], [50.0, 20.0]) == [[10.0, 0.0],
                                                                                                      [20.0, 0.0]]
    assert _yerr([None], [1.0]) is None


def test_recall_grows_with_rounds_within_one_gear_run(tmp_path: Path):
    run = make_run(tmp_path / "runs", "gear", "hybrid", "sync", BETTER, agent="GearAgent")
    preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    for p in preds:  # round 1 finds one gold passage, round 2 the final ranking; rounds 3-4 carried forward
        g = p["gold_ids"]
        p["rounds"] = [{"round": 1, "ranking": [g[0], "x"]}, {"round": 2, "ranking": p["rankings"]["final"]}]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    rows = evaluate_claims(find_runs([run]), load_claims(), EvidenceOptions(resamples=500))
    r = rows_by(rows, "recall_grows_with_rounds", "R@15")
    assert r.verdict == "holds" and r.n == N and r.mean_b == 50.0 and r.mean_a == pytest.approx(87.5)
    assert (r.paper_a, r.paper_b) == (71.5, 69.5) and r.run_a == r.run_b  # Table 9, beam length 2: n=4 vs n=1
    # another beam length and max_rounds: the paper's cells of that setting (Table 9, beam length 4: n=2 vs n=1)
    cfg = json.loads((run / "config.yaml").read_text())
    cfg["beam"]["length"], cfg["agent"]["max_rounds"] = 4, 2
    (run / "config.yaml").write_text(json.dumps(cfg))
    r = rows_by(evaluate_claims(find_runs([run]), load_claims(), EvidenceOptions(resamples=200)),
                "recall_grows_with_rounds", "R@15")
    assert (r.paper_a, r.paper_b) == (paper_value("Table 9", "GEAR", "MuSiQue", "R@15",
                                                  setting="beam length 4, max iterations 2"),
                                      paper_value("Table 9", "GEAR", "MuSiQue", "R@15",
                                                  setting="beam length 4, max iterations 1"))
    assert r.paper_a is not None and r.mean_a == pytest.approx(87.5)


def test_several_qualifying_pairs_are_named(runs: Path):
    make_run(runs, "bm25_naive_again", "bm25", "naive", BETTER)
    rows = evaluate_claims(find_runs([runs]), load_claims(), EvidenceOptions(resamples=200))
    note = rows_by(rows, "naivege_gt_base[BM25]").note
    assert note.startswith("2 pairs of runs qualify; tested the pair sharing the most questions")
    assert "also qualifying: " in note and ("(bm25_naive)" in note) != ("(bm25_naive_again)" in note)


def test_cells_without_predictions_say_so(runs: Path):
    (runs / "bm25" / "predictions.jsonl").unlink()
    df = long_table(find_runs([runs / "bm25"]), opts=EvidenceOptions(resamples=100))
    assert df["ci_low"].isna().all()
    from gear_repro.reporting.tables import wide_table

    assert wide_table(df).iloc[0, 0].startswith("0.0 [no CI] n=40")  # metrics.json's value and N


def test_report_options_that_do_not_parse_are_one_error(runs: Path, tmp_path: Path, capsys):
    """A price table or claims file of the wrong shape, a YAML error, a seed numpy refuses, a negative or NaN price:
    exit 2 and one line naming the file or option (no KeyError / AttributeError / ValueError traceback)."""
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "bad.yaml").write_text("a: [\n")
    (tmp_path / "neg.yaml").write_text('date: "2024"\ndefault: m\nmodels: {m: {input: -1, output: .nan}}\n')
    out = str(tmp_path / "rep")
    cases = [(["--prices", str(tmp_path / "list.yaml")], "price table .*list.yaml: expected a mapping with 'models'"),
             (["--prices", str(tmp_path / "bad.yaml")], "price table .*bad.yaml: while parsing"),
             (["--claims", "--claims-file", str(tmp_path / "list.yaml")], "claims file .*list.yaml: expected a mapping"),
             (["--seed", "-5"], r"--seed must be in \[0, 2\^32\), got -5"),
             # a negative or NaN price gave a negative / nan $ per 1k questions in the cost table
             (["--prices", str(tmp_path / "neg.yaml")], r"price table .*neg.yaml: model 'm' has input: -1 and "
                                                        r"output: nan; prices are \$ per 1M tokens, finite and >= 0")]
    for extra, msg in cases:
        assert report_main([str(runs), "--out", out, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert re.search(msg, err) and "Traceback" not in err, (extra, err)


def test_report_stem_is_a_name_not_a_path(runs: Path, tmp_path: Path, capsys):
    for stem in ("../../x", "sub/t", ".."):
        assert report_main([str(runs), "--out", str(tmp_path / "rep"), "--stem", stem]) == 2
        assert "--stem must be a file name stem without a folder" in capsys.readouterr().err
    assert not (tmp_path.parent / "x.md").exists()


def test_a_rank_the_run_did_not_evaluate_has_no_value(tmp_path: Path):
    """A run with run.ks=[5] keeps 5 passages per question: its "R@15" would be its R@5 under another name, so it has
    no R@15 in the claims (or Table 12 / Fig. 3), while its R@5 pairs as usual."""
    from gear_repro.reporting.evidence import values

    root = tmp_path / "runs"
    make_run(root, "bm25", "bm25", "none", BASE)
    only5 = make_run(root, "bm25_naive_k5", "bm25", "naive", BETTER)
    cfg = json.loads((only5 / "config.yaml").read_text())
    (only5 / "config.yaml").write_text(json.dumps({**cfg, "run": {"ks": [5]}}))
    runs = {r.path.name: r for r in find_runs([root])}
    assert runs["bm25_naive_k5"].ks == (5,) and not runs["bm25_naive_k5"].evaluates(15)
    assert values(runs["bm25_naive_k5"], "R@15") == {} and len(values(runs["bm25_naive_k5"], "R@5")) == N
    rows = evaluate_claims(list(runs.values()), load_claims(), EvidenceOptions(resamples=200))
    assert rows_by(rows, "naivege_gt_base[BM25]", "R@5").verdict == "holds"
    r15 = rows_by(rows, "naivege_gt_base[BM25]", "R@15")
    assert r15.verdict == "no runs" and r15.note == "no pair of runs with R@15 values agreeing on dataset.name, embedder.model"


def _labelled(config: dict) -> str:
    from gear_repro.reporting.runs import RunResult

    base = {"dataset": {"name": "musique_sample", "paper_name": "MuSiQue"},
            "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"}, "expansion": {"_target_": EXPANSIONS["sync"]}}
    return RunResult(Path("x"), {**base, **config}, {}).method


def role(cfg: dict, claim: str, side: str = "a") -> bool:
    """Whether a run of config ``cfg`` takes side ``side`` of claim ``claim`` (claims.yaml)."""
    from gear_repro.reporting.runs import RunResult

    return matches(RunResult(Path("x"), cfg, {}), {c["id"]: c for c in load_claims()}[claim][side])


def test_ablations_and_variants_are_named_and_never_take_the_papers_row():
    """A row sits beside a paper's number only when its label is the paper's method; a variant names what differs,
    and the claims' roles pin the same settings."""
    gear, single = "gear_repro.methods.gear.agent.GearAgent", "gear_repro.methods.single.SingleStep"
    t2rag, ircot = "gear_repro.methods.t2rag.method.T2RAGAgent", "gear_repro.methods.ircot.IRCoTAgent"
    hippo = "gear_repro.methods.hipporag.method.HippoRAGMethod"
    assert _labelled({"agent": {"_target_": gear}}) == "GEAR"
    assert _labelled({"agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["none"]}}) == "GEAR (no expansion)"
    assert _labelled({"agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["naive"]}}) == "GEAR (NaiveGE)"
    assert _labelled({"agent": {"_target_": single}}) == "Hybrid + SyncGE"
    assert _labelled({"agent": {"_target_": single}, "run": {"matched_k": False, "ks": [5, 10, 15]}}) == \
        "Hybrid + SyncGE (base k = 15)"
    assert _labelled({"agent": {"_target_": single}, "expansion": {"_target_": EXPANSIONS["none"]},
                      "run": {"matched_k": False}}) == "Hybrid"  # no expansion: one ranking whatever k
    assert _labelled({"agent": {"_target_": hippo}}) == "HippoRAG"
    assert _labelled({"agent": {"_target_": hippo}, "hipporag": {"version": "v2"}}) == "HippoRAG2"
    assert _labelled({"agent": {"_target_": ircot, "retriever": "hipporag"}, "hipporag": {"version": "v2"}}) == \
        "HippoRAG2 w/ IRCoT"
    t2 = {"_target_": t2rag, "max_iterations": 3, "with_passages": True}
    assert _labelled({"agent": t2}) == "T2RAG"
    assert _labelled({"agent": {**t2, "max_iterations": 1}}) == "T2RAG - single round"  # T²RAG Table 2's labels
    assert _labelled({"agent": {**t2, "with_passages": False}}) == "T2RAG - w/o chunk"
    assert _labelled({"agent": {**t2, "answer": False}}) == "T2RAG (K.3 reader)"
    from gear_repro.reporting.paper import paper_value

    assert paper_value("Table 2", "T2RAG - w/o chunk", "MuSiQue", "EM", paper="T2RAG", setting="GPT-4o-mini") \
        is not None
    # the roles: the paper's GEAR / T²RAG / HippoRAG w/ IRCoT only
    hybrid = {"retriever": {"_target_": CLASSES["hybrid"]}}
    assert role({**hybrid, "agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["sync"]},
                 "beam": {"length": 2}}, "gear_gt_hybrid_syncge")
    assert not role({**hybrid, "agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["none"]}},
                    "gear_gt_hybrid_syncge")
    assert not role({**hybrid, "agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["sync"]},
                     "beam": {"length": 4}}, "gear_gt_hybrid_syncge")
    assert role({**hybrid, "agent": {"_target_": gear}, "expansion": {"_target_": EXPANSIONS["sync"]},
                 "beam": {"length": 4}}, "recall_grows_with_rounds")  # Table 9: any beam length, its own cells
    assert not role({"agent": {**t2, "with_passages": False, "answer": True}}, "t2rag_gt_standard_rag")
    assert role({"agent": {**t2, "answer": True}}, "t2rag_gt_standard_rag")
    assert not role({"agent": {"_target_": ircot, "retriever": "hipporag"}, "hipporag": {"version": "v2"}},
                    "gear_gt_hipporag_ircot", "b")
    assert not role({**hybrid, "agent": {"_target_": single}, "expansion": {"_target_": EXPANSIONS["sync"]},
                     "run": {"matched_k": False}}, "gear_gt_hybrid_syncge", "b")
    # GEAR variants beyond base / expansion / beam length: named, and never the paper's GEAR
    paper_gear = {"retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"},
                  "agent": {"_target_": gear, "max_rounds": 4, "passage_link": True},
                  "expansion": {"_target_": EXPANSIONS["sync"]}, "beam": {"length": 2, "diversity": True},
                  "dataset": {"name": "musique_sample", "paper_name": "MuSiQue", "max_rounds": 4}}
    assert _labelled(paper_gear) == "GEAR" and role(paper_gear, "gear_gt_hybrid_syncge")
    for change, label in ((("agent", "max_rounds", 1), "GEAR (1 round)"),
                          (("agent", "passage_link", False), "GEAR (no passageLink)"),
                          (("beam", "diversity", False), "GEAR (no diversity)"),
                          (("beam", "length", 4), "GEAR (beam length 4)")):
        node, key, value = change
        variant = {**paper_gear, node: {**paper_gear[node], key: value}}
        assert _labelled(variant) == label and not role(variant, "gear_gt_hybrid_syncge"), label
    # the paper's rounds are the dataset's (MuSiQue 4), not the run's dataset.max_rounds (the
    # demo's dataset.max_rounds=2 made a 2-round GEAR "GEAR")
    two = {**paper_gear, "agent": {**paper_gear["agent"], "max_rounds": 2},
           "dataset": {**paper_gear["dataset"], "max_rounds": 2}}
    assert _labelled(two) == "GEAR (2 rounds)" and not role(two, "gear_gt_hybrid_syncge")
    # every method names its variants (probe 1.2), and the claims' roles take only the paper's row
    sync = {"retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"}, "agent": {"_target_": single},
            "expansion": {"_target_": EXPANSIONS["sync"]}}
    assert role({**sync, "beam": {"length": 2, "diversity": True}}, "gear_gt_hybrid_syncge", "b")
    for beam, label in (({"diversity": False}, "Hybrid + SyncGE (no diversity)"),
                        ({"length": 4, "width": 1}, "Hybrid + SyncGE (beam length 4, beam width 1)"),
                        ({"scorer": "fast"}, "Hybrid + SyncGE (fast scorer)")):
        assert _labelled({**sync, "beam": beam}) == label
        assert not role({**sync, "beam": beam}, "gear_gt_hybrid_syncge", "b"), label
    ircot_bm25 = {"agent": {"_target_": ircot, "retriever": "base", "max_rounds": 1, "top_k": 2},
                  "retriever": {"_target_": CLASSES["bm25"], "name": "bm25"}, "expansion": {"_target_": EXPANSIONS["none"]}}
    assert _labelled(ircot_bm25) == "IRCoT (BM25; 1 round, top_k 2)"
    h_ircot = {"agent": {"_target_": ircot, "retriever": "hipporag", "max_rounds": 4, "top_k": 10},
               "hipporag": {"version": "v1", "synonyms": True}}
    assert _labelled(h_ircot) == "HippoRAG w/ IRCoT" and role(h_ircot, "gear_gt_hipporag_ircot", "b")
    h_ircot["hipporag"] = {"version": "v1", "synonyms": False, "damping": 0.85}
    assert _labelled(h_ircot) == "HippoRAG w/ IRCoT (no synonym edges, damping 0.85)"
    assert not role(h_ircot, "gear_gt_hipporag_ircot", "b")
    assert _labelled({"agent": {"_target_": hippo}, "hipporag": {"node_specificity": False}}) == \
        "HippoRAG (no node specificity)"


@pytest.mark.parametrize(("node", "settings", "label"), [
    ("beam", {"dead_ends": "drop"}, "Hybrid + SyncGE (dead ends: drop)"),
    ("beam", {"exists": "none", "neighbour_selection": "order"}, "Hybrid + SyncGE (exists rule: none, neighbours by order)"),
    ("expansion", {"fusion_order": "expanded_first"}, "Hybrid + SyncGE (expanded_first fusion)"),
    ("expansion", {"k_rrf": 1}, "Hybrid + SyncGE (Eq. 3 k_rrf 1)"),
    ("expansion", {"max_proximal": 2, "on_no_proximal": "naive"},
     "Hybrid + SyncGE (at most 2 proximal triples, no proximal triples: naive)"),
    ("expansion", {"prompt": "my_reader"}, "Hybrid + SyncGE (my_reader reader prompt)"),
    ("expansion", {"k_rrf": 60, "fusion_order": "base_first", "max_proximal": None}, "Hybrid + SyncGE"),
])
def test_a_reading_of_alg1_or_eq3_names_its_row(node, settings, label):
    """Alg. 1's dead-end / exists / neighbour-selection readings, Eq. 3's RRF constant and list order and
    SyncGE's reader switches (docs/readings.md) kept "Hybrid + SyncGE" beside Table 2's cell and its claims."""
    from gear_repro.reporting.runs import RunResult

    cfg = {"agent": {"_target_": "gear_repro.methods.single.SingleStep"}, "dataset": {"paper_name": "MuSiQue"},
           "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"},
           "expansion": {"_target_": EXPANSIONS["sync"], **(settings if node == "expansion" else {})},
           "beam": settings if node == "beam" else {}}
    run = RunResult(Path("x"), cfg, {})
    assert run.method == label and run.is_paper_row == (label == "Hybrid + SyncGE")


def test_gear_memory_repeats_and_another_passage_link_k_name_the_row():
    from gear_repro.reporting.runs import RunResult

    gear = {"agent": {"_target_": "gear_repro.methods.gear.agent.GearAgent", "base_k": 10},
            "dataset": {"paper_name": "MuSiQue"}, "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"},
            "expansion": {"_target_": EXPANSIONS["sync"]}}
    # Eq. 5 / the pseudocode's extend keep repeats: false is the paper's row, true the variant (earlier the reverse)
    for agent, label in (({"dedupe_memory": True}, "GEAR (memory de-duplicated)"), ({"dedupe_memory": False}, "GEAR"),
                         ({"passage_link_k": 3}, "GEAR (passageLink k 3)"),
                         ({"passage_link_k": 10}, "GEAR"), ({"passage_link_k": None}, "GEAR")):
        run = RunResult(Path("x"), {**gear, "agent": {**gear["agent"], **agent}}, {})
        assert run.method == label and run.is_paper_row == (label == "GEAR"), agent


@pytest.mark.parametrize(("agent", "retriever", "backend", "label"), [
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "bm25", {"bm25": {"k1": 2.0}}, "BM25 (BM25 k1 2.0)"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "bm25", {"bm25": {"k1": 1.2, "b": 0.75}}, "BM25"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "bm25", {"bm25": {"method": "lucene"}}, "BM25"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "bm25", {"bm25": {"method": "bm25l"}},
     "BM25 (BM25 variant bm25l)"),  # another formula than Elasticsearch's (Lucene's) sat beside the paper's cell
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "hybrid", {"bm25": {"method": "robertson"}},
     "Hybrid (BM25 variant robertson)"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "sbert", {"bm25": {"k1": 2.0}}, "SBERT"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "hybrid", {"bm25": {"b": 0.3}}, "Hybrid (BM25 b 0.3)"),
    ({"_target_": "gear_repro.methods.gear.agent.GearAgent"}, "hybrid", {"bm25": {"k1": 0.9}}, "GEAR (BM25 k1 0.9)"),
    ({"_target_": "gear_repro.methods.ircot.IRCoTAgent", "retriever": "base"}, "bm25", {"bm25": {"k1": 0.9}},
     "IRCoT (BM25; BM25 k1 0.9)"),
    ({"_target_": "gear_repro.methods.ircot.IRCoTAgent", "retriever": "hipporag"}, "bm25", {"bm25": {"k1": 0.9}},
     "HippoRAG w/ IRCoT"),  # its searches never reach BM25
    ({"_target_": "gear_repro.methods.hipporag.method.HippoRAGMethod"}, "hybrid", {"bm25": {"k1": 0.9}}, "HippoRAG"),
    # GRIEVER ranks with the backend's BM25 too: alone and as GEAR's base
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "griever", {"bm25": {"k1": 1.2}}, "GRIEVER"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "griever", {"bm25": {"k1": 2.0}}, "GRIEVER (BM25 k1 2.0)"),
    ({"_target_": "gear_repro.methods.gear.agent.GearAgent"}, "griever", {"bm25": {"method": "bm25l"}},
     "GEAR + GRIEVER (BM25 variant bm25l)"),
    ({"_target_": "gear_repro.methods.single.SingleStep"}, "composed", {"bm25": {"b": 0.3}}, "Composed (BM25 b 0.3)"),
])
def test_the_base_retrievers_settings_name_the_row_of_a_method_that_uses_them(agent, retriever, backend, label):
    """BM25's k1/b (Elasticsearch's defaults, GEAR App. B.1), its formula (Lucene's, bm25s ``lucene``) and the hybrid's
    RRF k are settings of the paper's rows (also of GRIEVER, which ranks with the backend's BM25): a run with BM25 k1 = 2 sat beside Table 2's BM25 cell as "BM25" and stood for it in claims; a method that never
    ranks with the base retriever (HippoRAG, HippoRAG w/ IRCoT, T²RAG) is not named by them."""
    from gear_repro.reporting.runs import RunResult

    cfg = {"agent": agent, "dataset": {"paper_name": "MuSiQue"}, "backend": backend,
           "retriever": {"_target_": CLASSES[retriever], "name": retriever},
           "expansion": {"_target_": EXPANSIONS["none" if agent["_target_"].endswith("SingleStep") else "sync"]}}
    if "hipporag" in agent["_target_"].lower() or agent.get("retriever") == "hipporag":
        cfg["hipporag"] = {"version": "v1"}
    run = RunResult(Path("x"), cfg, {})
    assert run.method == label and run.is_paper_row == ("(" not in label)
    hybrid = {**cfg, "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid", "k_rrf": 30}, "backend": {},
              "agent": {"_target_": "gear_repro.methods.single.SingleStep"}, "expansion": {"_target_": EXPANSIONS["none"]}}
    assert RunResult(Path("x"), hybrid, {}).method == "Hybrid (RRF k 30)"


OLD_ANALYSIS = {"stopwords": "en", "stemmer": "english"}  # the memory backend's earlier default


@pytest.mark.parametrize(("retriever", "via", "bm25", "label"), [
    ("bm25", "base", {"analyzer": "standard"}, "IRCoT (BM25)"),
    ("bm25", "base", {"analyzer": None, "stopwords": None, "stemmer": None}, "IRCoT (BM25)"),  # the default
    ("bm25", "base", {"analyzer": None, **OLD_ANALYSIS}, "IRCoT (BM25; stop words en, english stemmer)"),
    ("bm25", "base", {"analyzer": "english"}, "IRCoT (BM25; english analyzer)"),
    ("bm25", "base", {"analyzer": "standard", **OLD_ANALYSIS}, "IRCoT (BM25)"),  # the analyzer replaces both
    ("hybrid", "base", {"analyzer": None, **OLD_ANALYSIS}, "IRCoT (Hybrid; stop words en, english stemmer)"),
    ("bm25", "hipporag", {"analyzer": None, **OLD_ANALYSIS}, "HippoRAG w/ IRCoT"),  # never reaches BM25
])
def test_ircot_bm25_names_an_analyzer_other_than_its_reference_index(retriever, via, bm25, label):
    """IRCoT (BM25)'s index is Elasticsearch's standard analyzer (HippoRAG legacy src/elastic_search_tool.py:6-28),
    now every method's default (BM25_SETTINGS): the memory backend's earlier stop words + stemmer name the row."""
    from gear_repro.reporting.runs import RunResult

    cfg = {"agent": {"_target_": "gear_repro.methods.ircot.IRCoTAgent", "retriever": via},
           "dataset": {"paper_name": "MuSiQue"}, "backend": {"bm25": bm25},
           "retriever": {"_target_": CLASSES[retriever], "name": retriever}, "hipporag": {"version": "v1"}}
    run = RunResult(Path("x"), cfg, {})
    assert run.method == label and run.is_paper_row == ("(" not in label.replace("(BM25)", "").replace("(Hybrid)", ""))


@pytest.mark.parametrize(("agent", "retriever", "bm25", "label"), [
    ("gear_repro.methods.single.SingleStep", "bm25", {"analyzer": None, "stopwords": None, "stemmer": None}, "BM25"),
    ("gear_repro.methods.single.SingleStep", "bm25", {"analyzer": None, **OLD_ANALYSIS},
     "BM25 (stop words en, english stemmer)"),
    ("gear_repro.methods.single.SingleStep", "hybrid", {"analyzer": None, "stopwords": "en", "stemmer": None},
     "Hybrid (stop words en)"),
    ("gear_repro.methods.single.SingleStep", "bm25", {"analyzer": "english"}, "BM25 (english analyzer)"),  # ES backend
    ("gear_repro.methods.single.SingleStep", "bm25", {"analyzer": "standard"}, "BM25"),
    ("gear_repro.methods.single.SingleStep", "sbert", {"analyzer": "english"}, "SBERT"),  # no BM25 in it
    ("gear_repro.methods.gear.agent.GearAgent", "hybrid", {"analyzer": None, **OLD_ANALYSIS},
     "GEAR (stop words en, english stemmer)"),
])
def test_bm25_text_analysis_other_than_elasticsearchs_default_names_the_row(agent, retriever, bm25, label):
    """GEAR App. B.1 ran every method on Elasticsearch, whose text field defaults to the standard analyzer (no stop
    words, no stemming): a BM25 row on the memory backend's earlier stop words + stemmer, or on ES's english
    analyzer, sat beside the paper's cells as "BM25"."""
    from gear_repro.reporting.runs import RunResult

    cfg = {"agent": {"_target_": agent}, "dataset": {"paper_name": "MuSiQue"}, "backend": {"bm25": bm25},
           "retriever": {"_target_": CLASSES[retriever], "name": retriever},
           "expansion": {"_target_": EXPANSIONS["none" if agent.endswith("SingleStep") else "sync"]}}
    run = RunResult(Path("x"), cfg, {})
    assert run.method == label and run.is_paper_row == ("(" not in label)


@pytest.mark.parametrize(("agent", "qa", "metric", "note"), [
    ("gear_repro.methods.gear.agent.GearAgent", True, "hotpotqa", "hotpotqa answer script"),
    ("gear_repro.methods.gear.agent.GearAgent", True, "musique", None),  # MuSiQue's own, as the default
    ("gear_repro.methods.gear.agent.GearAgent", True, None, None),
    ("gear_repro.methods.t2rag.method.T2RAGAgent", False, "twowiki", "2wiki answer script"),  # its own answers
])
def test_em_f1_by_another_datasets_answer_script_leave_the_papers_cell(agent, qa, metric, note):
    """dataset.answer_metric=hotpotqa on MuSiQue scored EM/F1 with HotpotQA's script (its F1 differs on empty and
    yes/no answers) and the run's EM/F1 sat beside Table 3's MuSiQue cell as the paper's row."""
    from gear_repro.reporting.runs import RunResult

    cfg = {"agent": {"_target_": agent}, "qa": qa, "dataset": {"paper_name": "MuSiQue", "answer_metric": metric},
           "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"}, "expansion": {"_target_": EXPANSIONS["sync"]}}
    run = RunResult(Path("x"), cfg, {})
    method, _ = run.label_for("EM")
    assert run.qa_notes == ((note,) if note else ()) and (note is None or note in method), method
    assert run.label_for("R@5")[0] == run.method  # recall is not scored by the answer script


def test_every_neighbour_is_a_variant_however_it_is_spelt():
    """beam.neighbours null and 0 both mean every neighbour (beam_search.py): 0 was named "0 neighbours" but null,
    read as "not recorded", left the row the paper's (100 neighbours) and let it stand for it in a claim."""
    from gear_repro.reporting.runs import RunResult

    sync = {"agent": {"_target_": "gear_repro.methods.single.SingleStep"}}
    for neighbours in (None, 0):
        cfg = {**sync, "beam": {"length": 2, "neighbours": neighbours}}
        assert _labelled(cfg) == "Hybrid + SyncGE (all neighbours)", neighbours
        assert not RunResult(Path("x"), {"dataset": {"paper_name": "MuSiQue"}, **cfg,
                                         "retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"},
                                         "expansion": {"_target_": EXPANSIONS["sync"]}}, {}).is_paper_row
    assert _labelled({**sync, "beam": {"neighbours": 100}}) == "Hybrid + SyncGE"
    assert _labelled({**sync, "beam": {"length": 2}}) == "Hybrid + SyncGE"  # not recorded: the default
    assert _labelled({**sync, "beam": {"gamma": None, "width": 10}}) == "Hybrid + SyncGE"  # null gamma = 2b = 20


def test_any_evaluated_rank_gets_its_column(tmp_path: Path):
    """run.ks=[3, 20]: R@3 and R@20 are tabulated (no paper number), not dropped, and the report does not fail (it raised KeyError 'table',
    and R@20 was dropped beside other runs)."""
    root = tmp_path / "runs"
    odd = make_run(root, "odd", "bm25", "none", BASE)
    cfg = json.loads((odd / "config.yaml").read_text())
    (odd / "config.yaml").write_text(json.dumps({**cfg, "run": {"ks": [3, 20]}}))
    (odd / "metrics.json").write_text(json.dumps({"recall@3": 50.0, "recall@20": 50.0, "n_questions": N}))
    make_run(root, "std", "sbert", "none", BASE)
    (root / "std" / "metrics.json").write_text(json.dumps({f"recall@{k}": 50.0 for k in (5, 10, 15)}))
    long = long_table(find_runs([root]), opts=EvidenceOptions(resamples=100))
    assert sorted(long[long.run_dir.str.endswith("odd")].metric) == ["R@20", "R@3"]
    assert long[long.metric == "R@20"]["paper"].isna().all()
    out = tmp_path / "rep"
    assert report_main([str(root), "--out", str(out)]) == 0
    header = next(line for line in (out / "table.md").read_text().splitlines() if line.startswith("|"))
    assert [c.strip().split()[-1] for c in header.strip("|").split("|")[1:]] == \
        ["R@3", "R@5", "R@10", "R@15", "R@20", "errors"]


def test_errored_questions_never_decide_a_claim(tmp_path: Path) -> None:
    """A run whose questions failed (a dead endpoint) was "contradicted" on recall and "held" on tokens (its failed
    calls cost 0); errored questions now leave the pair, a pair with nothing left is refused, and the cost table
    counts them apart."""
    from gear_repro.reporting.cost import cost_table

    root = tmp_path / "runs"
    base = make_run(root, "bm25", "bm25", "none", BASE)
    naive = make_run(root, "bm25_naive", "bm25", "naive", BETTER)
    preds = [json.loads(line) for line in (naive / "predictions.jsonl").read_text().splitlines()]
    for p in preds[:30]:  # the 30 questions where it was better failed instead: no signal left in it
        p.update(error="LLMCallError: Connection refused", rankings={"final": []})
    (naive / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    r = rows_by(evaluate_claims(find_runs([root]), load_claims(), EvidenceOptions(resamples=200)),
                "naivege_gt_base[BM25]")
    assert r.n == 10 and r.diff == 0 and r.verdict != "contradicted"
    assert "30 question(s) errored in a or b (scored as misses in the tables): left out" in r.note
    for p in preds:
        p["error"] = "LLMCallError: Connection refused"
    (naive / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    r = rows_by(evaluate_claims(find_runs([root]), load_claims(), EvidenceOptions(resamples=200)),
                "naivege_gt_base[BM25]")
    assert r.verdict == "refused" and r.n is None
    cost = cost_table(find_runs([base]), {"input": 1.0, "output": 1.0, "model": "m", "date": "d"})
    assert list(cost["n_errored"]) == [0]
    assert cost_table(find_runs([naive]), {"input": 1.0, "output": 1.0, "model": "m", "date": "d"}).empty


def test_baseline_and_gear_settings_beyond_the_loop_are_named():
    """IRCoT's passage layout and demonstrations and GEAR's gist/query settings are part of the paper's row: a HippoRAG w/ IRCoT run with IRCoT's "Wikipedia Title: " layout on MuSiQue, or GEAR with the
    earlier gist cap of 10, kept the paper's label and stood for it in claims."""
    ircot = "gear_repro.methods.ircot.IRCoTAgent"
    musique = {"paper_name": "MuSiQue", "name": "musique_sample", "max_rounds": 4}
    h_ircot = {"agent": {"_target_": ircot, "retriever": "hipporag", "max_rounds": 4, "top_k": 10,
                         "title_prefixes": {"MuSiQue": "", "HotpotQA": "Wikipedia Title: "}},
               "hipporag": {"version": "v1"}, "dataset": musique}
    assert _labelled(h_ircot) == "HippoRAG w/ IRCoT"
    old_layout = {**h_ircot, "agent": {**h_ircot["agent"], "title_prefixes": {"MuSiQue": "Wikipedia Title: "}}}
    assert _labelled(old_layout) == "HippoRAG w/ IRCoT (title prefix 'Wikipedia Title:')"
    assert not role(old_layout, "gear_gt_hipporag_ircot", "b")
    # only the run's dataset entry counts; IRCoT (BM25)'s reference layout is the prefix on every dataset
    hotpot = {**h_ircot, "dataset": {**musique, "paper_name": "HotpotQA", "max_rounds": 2},
              "agent": {**h_ircot["agent"], "max_rounds": 2}}
    assert _labelled(hotpot) == "HippoRAG w/ IRCoT"
    bm25 = {"agent": {"_target_": ircot, "retriever": "base", "title_prefixes": {"MuSiQue": ""}, "num_demo": None,
                      "demo_budget": 15000},
            "retriever": {"_target_": CLASSES["bm25"], "name": "bm25"}, "dataset": musique}
    assert _labelled(bm25) == ("IRCoT (BM25; title prefix 'none', all demonstrations, demonstrations within 15000 "
                               "tokens)")
    gear = {"retriever": {"_target_": CLASSES["hybrid"], "name": "hybrid"},
            "agent": {"_target_": "gear_repro.methods.gear.agent.GearAgent", "max_rounds": 4, "gist_k": None},
            "expansion": {"_target_": EXPANSIONS["sync"]}, "dataset": musique}
    assert _labelled(gear) == "GEAR" and role(gear, "gear_gt_hybrid_syncge")
    for key, value, note in (("gist_k", 10, "gist of the top 10"), ("gist_docs", "fused", "gist of the fused list"),
                             ("query_for_beam", "rewritten", "beam query: rewritten"), ("base_k", 5, "base k 5")):
        variant = {**gear, "agent": {**gear["agent"], key: value}}
        assert _labelled(variant) == f"GEAR ({note})" and not role(variant, "gear_gt_hybrid_syncge"), key


def test_an_embedder_a_bm25_run_never_used_does_not_keep_it_from_pairing(tmp_path: Path) -> None:
    """a BM25 run builds an embedder object that encodes nothing (run.json describes it), so "NaiveGE >
    BM25" found no pair when the BM25 run kept the default embedder (mpnet) and NaiveGE ran MiniLM; two runs that both
    embed still pair only on one embedder, and a BM25 run's tag names no embedder setting."""
    root = tmp_path / "runs"
    for name, ret, exp, hits, emb in (("bm25", "bm25", "none", BASE, "all-mpnet-base-v2"),
                                      ("bm25_naive", "bm25", "naive", BETTER, "all-MiniLM-L6-v2"),
                                      ("sbert", "sbert", "none", BASE, "all-mpnet-base-v2"),
                                      ("sbert_naive", "sbert", "naive", BETTER, "all-MiniLM-L6-v2")):
        run = make_run(root, name, ret, exp, hits, embedder=emb)
        cfg = json.loads((run / "config.yaml").read_text())
        cfg["agent"]["_target_"] = "gear_repro.methods.single.SingleStep"  # an importable class: its needs_vectors
        (run / "config.yaml").write_text(json.dumps(cfg))
        (run / "run.json").write_text(json.dumps({"embedder": {"model": emb}}))
    runs = find_runs([root])
    assert {Path(r.path).name: r.needs_vectors for r in runs} == {"bm25": False, "bm25_naive": True, "sbert": True,
                                                                 "sbert_naive": True}
    rows = evaluate_claims(runs, load_claims(), EvidenceOptions(resamples=200))
    assert rows_by(rows, "naivege_gt_base[BM25]").verdict == "holds"
    assert rows_by(rows, "naivege_gt_base[SBERT]").verdict == "no runs"  # both embed, with other models
    bm25 = next(r for r in runs if Path(r.path).name == "bm25")
    assert not bm25.uses("embedder.model") and bm25.uses("retriever.name")


def test_a_row_tag_names_settings_that_change_numbers_not_timeouts(tmp_path: Path) -> None:
    """two IRCoT runs on two LLMs that also differed in llm.timeout_s/backoff were tagged
    "[dataset.limit=2, llm.backoff_base_s=0.01, llm.backoff_max_s=0.02, ...]": the model hid behind "..."; settings the
    resume fingerprint leaves out (they change no number) are never a tag."""
    from gear_repro.reporting.runs import tag_runs

    root = tmp_path / "runs"
    for name, extra in (("a", {"llm": {"model": "m1", "timeout_s": 5, "backoff_base_s": 0.01, "concurrency": 2},
                               "run": {"workers": 1}}),
                        ("b", {"llm": {"model": "m2", "timeout_s": 300, "backoff_base_s": 1.0, "concurrency": 8},
                               "run": {"workers": 4}})):
        run = make_run(root, name, "bm25", "none", BASE)
        cfg = json.loads((run / "config.yaml").read_text())
        (run / "config.yaml").write_text(json.dumps({**cfg, **extra}))
    runs = find_runs([root])
    tag_runs(runs)
    assert sorted(r.tag for r in runs) == ["llm.model=m1", "llm.model=m2"]


def test_a_tag_never_names_a_setting_the_fingerprint_leaves_out(tmp_path: Path) -> None:
    """The report kept its own copy of the runner's list of settings that change no result, and it drifted: a sweep
    over ``llm.server.n_threads`` was tagged "[llm.server.n_threads=2]". One list now (run_folder); the settings
    that name what serves the model (a GGUF path, an endpoint) still tell two runs apart."""
    from gear_repro.pipeline.run_folder import changes_no_result

    for key in ("llm.server.n_threads", "llm.server.port", "run.workers", "embedder.batch_size", "report.table"):
        assert changes_no_result(key), key
    for key in ("llm.server.model_path", "llm.base_url", "llm.model", "dataset.limit", "run.ks"):
        assert not changes_no_result(key), key
    for sweep, values in (("threads", {"n_threads": 2}, ), ("models", {"model_path": "a.gguf"})):
        root = tmp_path / sweep
        for name, value in (("j0", 2), ("j1", 8)) if sweep == "threads" else (("j0", "a.gguf"), ("j1", "b.gguf")):
            run = make_run(root, name, "bm25", "none", BASE)
            cfg = json.loads((run / "config.yaml").read_text())
            server = {next(iter(values)): value}
            (run / "config.yaml").write_text(json.dumps({**cfg, "llm": {"model": "m", "server": server}}))
        tags = sorted(r.tag for r in find_runs([root]))
        assert tags == (["j0", "j1"] if sweep == "threads" else ["llm.server.model_path=a.gguf",
                                                                 "llm.server.model_path=b.gguf"]), tags


def test_code_versions_are_told_apart_by_the_packages_source(compose, toy_dir: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    """A resume after an uncommitted edit was recorded as commit + "-dirty" only: a tree already dirty got no note,
    and three versions were listed as two identical ones. code_history records the hash of the package's files
    (utils/provenance.source_hash) and the report tells versions apart by it."""
    from gear_repro.pipeline import resume
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.provenance import environment, source_hash

    assert environment()["source"] == source_hash() and len(source_hash()) == 16
    run = tmp_path / "run"
    dirty = "a" * 40 + "-dirty"
    for source, limit in (("1" * 16, 1), ("2" * 16, 2), ("3" * 16, 3)):  # one dirty tree, edited between starts
        monkeypatch.setattr(resume, "environment", lambda s=source: {"git_commit": dirty, "source": s})
        Runner(compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                        f"dataset.limit={limit}"]), run).run()
    history = json.loads((run / "run.json").read_text())["code_history"]
    assert [(h["source"], h["finished_before"]) for h in history] == [("1" * 16, 0), ("2" * 16, 1), ("3" * 16, 2)]
    assert "were run by other code (source 2222222222222222, now 3333333333333333)" in caplog.text
    notes = find_runs([run])[0].notes
    assert any("3 code versions (aaaaaaaaaaaa-dirty source 11111111, aaaaaaaaaaaa-dirty source 22222222, "
               "aaaaaaaaaaaa-dirty source 33333333;" in n for n in notes), notes


def test_a_lossy_encoder_is_never_the_papers_row():
    """embedder.backend=onnx-int8 (cosine 0.96 / 0.77 to the model's vectors, docs/encoders.md) sat as "SBERT" or
    "Hybrid + SyncGE" beside the paper's cells (probe 21); the fp32 back-ends, equal to torch's vectors, do not, nor
    does int8 on a run that encodes nothing (BM25)."""
    single = {"agent": {"_target_": "gear_repro.methods.single.SingleStep"}}
    assert _labelled({**single, "embedder": {"backend": "onnx-int8"}}) == "Hybrid + SyncGE (onnx-int8 encoder)"
    assert not role({**single, "embedder": {"backend": "onnx-int8"}, "retriever": {"_target_": CLASSES["hybrid"]},
                     "expansion": {"_target_": EXPANSIONS["sync"]}}, "gear_gt_hybrid_syncge", "b")
    assert _labelled({**single, "embedder": {"backend": "openvino"}}) == "Hybrid + SyncGE"
    bm25 = {**single, "embedder": {"backend": "onnx-int8"}, "retriever": {"_target_": CLASSES["bm25"], "name": "bm25"},
            "expansion": {"_target_": EXPANSIONS["none"]}}
    assert _labelled(bm25) == "BM25"


@pytest.mark.parametrize("setting, paper", [(None, None), ("GPT-4o-mini", (15.3, 21.1)),
                                            ("Gemini-2.5-flash", (7.9, 10.7))])
def test_a_cell_the_paper_gives_under_several_settings_needs_one_named(tmp_path: Path, setting, paper):
    """``report.qa_paper=T2RAG report.qa_paper_table='Table 1'`` without ``report.qa_setting`` put T²RAG Table 1's first
    row, Gemini-2.5-flash's BM25 7.9 / 10.7, beside the run as "the paper"; GPT-4o-mini's is 15.3 / 21.1.
    Any of several settings is none of them: no number, and a note naming them."""
    run = make_run(tmp_path / "runs", "bm25_qa", "bm25", "none", [1, 2], answers_right=[True, False])
    cfg = json.loads((run / "config.yaml").read_text())
    cfg["report"] = {"method": "BM25", "qa_paper": "T2RAG", "qa_paper_table": "Table 1", "qa_setting": setting}
    (run / "config.yaml").write_text(json.dumps(cfg))
    (run / "metrics.json").write_text(json.dumps({"recall@5": 75.0, "em": 50.0, "f1": 50.0, "n_questions": 2}))
    put_on_paper_setting(run, "T2RAG", "Table 1", "MuSiQue")
    runs = find_runs([run])
    df = long_table(runs, opts=EvidenceOptions(resamples=200))
    got = tuple(df[df.metric == m].paper.iloc[0] for m in ("EM", "F1"))
    assert all(pd.isna(g) for g in got) if paper is None else got == paper
    assert any("Gemini-2.5-flash; GPT-4o-mini" in n and "report.qa_setting" in n for n in runs[0].notes) \
        == (setting is None)
    assert paper_value("Table 9", "GEAR", "MuSiQue", "R@15") is None  # twelve settings (beam length × rounds)
    assert paper_value("Table 9", "GEAR", "MuSiQue", "R@15", setting="beam length 2, max iterations 4") == 71.5


def test_gold_passages_missing_from_the_corpus_are_noted_by_the_report(tmp_path: Path) -> None:
    """The bundled 2Wiki sample (2wiki_hipporag) has 75 of 737 gold references outside its corpus: recall counts them as
    misses (HippoRAG's rule), so its rows sit below the paper's with a ceiling under 100; only run.log said so at load
    time, the report did not."""
    run = make_run(tmp_path / "runs", "bm25", "bm25", "none", [1, 2])
    (run / "run.json").write_text(json.dumps({"data_warnings": {"gold_not_in_corpus": 75}}))
    clean = make_run(tmp_path / "runs", "bm25_all", "bm25", "none", [1, 2])
    runs = {r.path.name: r for r in find_runs([tmp_path / "runs"])}
    assert any("75 gold passage ids" in n and "cannot reach 100" in n for n in runs["bm25"].notes)
    assert not any("gold passage ids" in n for n in runs[clean.name].notes)


def test_a_run_resumed_after_a_code_change_is_named_by_the_report(compose, toy_dir: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The resume fingerprint leaves code out, and run.json kept only the last start's commit: a run resumed after a
    method change (a `git pull` between two halves) mixed two methods' records in one row, silently."""
    from gear_repro.pipeline import resume
    from gear_repro.pipeline.runner import Runner

    run = tmp_path / "run"
    for commit, limit in (("a" * 40, 2), ("a" * 40, 2), ("b" * 40 + "-dirty", 3)):  # the 2nd start runs nothing
        monkeypatch.setattr(resume, "environment", lambda c=commit: {"git_commit": c})
        Runner(compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                        f"dataset.limit={limit}"]), run).run()
    history = json.loads((run / "run.json").read_text())["code_history"]
    assert history == [{"git_commit": "a" * 40, "finished_before": 0},
                       {"git_commit": "b" * 40 + "-dirty", "finished_before": 2}]
    notes = find_runs([run])[0].notes
    assert any("2 code versions (aaaaaaaaaaaa, bbbbbbbbbbbb-dirty;" in n for n in notes), notes
    Runner(compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                    "dataset.limit=3", "run.resume=false"]), run).run()  # a fresh start forgets the old ones
    assert [h["finished_before"] for h in json.loads((run / "run.json").read_text())["code_history"]] == [0]
    assert not any("code versions" in n for n in find_runs([run])[0].notes)


def test_the_report_takes_the_flags_run_json_records_not_todays_classes(tmp_path: Path) -> None:
    """The report re-imported each run's classes by ``_target_`` to learn k_dependent / needs_vectors, so a class
    moved or changed since the run changed how yesterday's run was read; run.json's ``report_flags`` (the runner's)
    now decide, and the import is the fallback of runs written before them."""
    from gear_repro.reporting.figures import _is_figure2_reference
    from gear_repro.reporting.runs import find_runs

    root = tmp_path / "runs"
    flagged = make_run(root, "flagged", "bm25", "sync", BASE)  # its agent's _target_ names no class that exists
    (flagged / "run.json").write_text(json.dumps({"report_flags": {
        "k_dependent": False, "needs_vectors": False, "figure2_reference": False}}))
    old = make_run(root, "old", "bm25", "sync", BASE)
    (old / "run.json").write_text(json.dumps({"method": {"name": "single"}}))
    runs = {Path(r.path).name: r for r in find_runs([root])}
    assert (runs["flagged"].k_dependent, runs["flagged"].needs_vectors) == (False, False)
    assert not _is_figure2_reference(runs["flagged"])
    # no flags: the classes decide (an agent class that cannot be imported counts as k-dependent and embedding;
    # the SyncGE expansion of a single-step config is Fig. 2's reference)
    assert (runs["old"].k_dependent, runs["old"].needs_vectors) == (True, True)
    assert _is_figure2_reference(runs["old"])


def _scored_run(root: Path, name: str, order: list[int]) -> Path:
    """A finished BM25 run on 40 questions whose predictions.jsonl and metrics.json list them in ``order``."""
    run = root / name
    run.mkdir(parents=True)
    gold = [[f"g{j}" for j in range(1 + i % 7)] for i in range(40)]  # recalls of many values: 0, 1/7 ... 1
    preds = [{"id": f"q{i:02d}", "gold_ids": gold[i], "answers": ["x"], "type": "2hop" if i % 2 else "3hop",
              "rankings": {"final": [*gold[i][:i % 4], "y1", "y2", "y3", "y4", "y5"][:5]}} for i in range(40)]
    preds = [preds[i] for i in order]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (run / "metrics.json").write_text(json.dumps({"n_questions": 40, "question_ids": [p["id"] for p in preds]}))
    (run / "config.yaml").write_text(json.dumps({
        "dataset": {"name": "toy"}, "run": {"ks": [5]},
        "retriever": {"_target_": "gear_repro.retrieval.base.BM25Retriever", "name": "bm25"},
        "agent": {"_target_": "gear_repro.methods.single.SingleStep", "name": "single"}}))
    return run


def test_a_reordered_predictions_file_gives_the_same_interval(tmp_path: Path) -> None:
    """The bootstrap resamples questions by id: the same run listed in another order has the same interval, in the
    tables' intervals and the explorer's curves alike."""
    from gear_repro.reporting.evidence import interval
    from gear_repro.reporting.html.plots import recall_by_type, recall_curve

    order = list(range(40))
    shuffled = order[::-1][::2] + order[::-1][1::2]
    a, b = find_runs([_scored_run(tmp_path, "a", order)])[0], find_runs([_scored_run(tmp_path, "b", shuffled)])[0]
    ia, ib = interval(a, "recall@5"), interval(b, "recall@5")
    assert ia == ib and ia.low < ia.mean < ia.high
    opts = EvidenceOptions()
    curve = lambda run: recall_curve(run, load_predictions(run), opts)  # noqa: E731
    assert {k: v for k, v in curve(a).items() if k != "label"} == {k: v for k, v in curve(b).items() if k != "label"}
    assert recall_by_type(a, load_predictions(a), opts)["types"] == recall_by_type(b, load_predictions(b), opts)["types"]


def test_a_reordered_copy_of_the_questions_is_paired_with_them(compose, toy_dir: Path, tmp_path: Path) -> None:
    """The same-questions check reads content: a copy of the questions file in another order (other file hashes) is
    the same question set, so compare() and the claims pair its run with the original's."""
    from gear_repro.api import runs as api_runs
    from gear_repro.pipeline.runner import Runner
    from gear_repro.reporting.runs import check_same_data, different_data

    copy = tmp_path / "copy"
    copy.mkdir()
    for f in ("corpus.jsonl", "triples.jsonl"):
        (copy / f).write_bytes((toy_dir / f).read_bytes())
    lines = (toy_dir / "questions.jsonl").read_text().splitlines()
    (copy / "questions.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    for data, run in ((toy_dir, "a"), (copy, "b")):
        Runner(compose([f"dataset.path={data}", "dataset.name=toy", "run.progress=false", "retriever=bm25"]),
               tmp_path / run).run()
    a, b = find_runs([tmp_path / "a"])[0], find_runs([tmp_path / "b"])[0]
    assert a.data["questions"] != b.data["questions"]  # other files
    assert different_data(a, b) is None
    check_same_data([a, b])
    assert not [n for n in b.notes if "not comparable" in n]
    assert api_runs.compare(tmp_path / "a", tmp_path / "b").n == 3
