"""Baseline presets place their rows beside the paper's numbers (Tables 2, 3, 7) and the HippoRAG w/ IRCoT
series reaches Fig. 2 and Fig. 4."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gear_repro.config import to_container, validate
from gear_repro.reporting.claims import load_claims, matches
from gear_repro.reporting.figures import cumulative_tokens, draw_rounds, draw_tokens
from gear_repro.reporting.runs import RunResult
from gear_repro.reporting.tables import long_table
from tests.helpers.paper_setting import put_on_paper_setting

METRICS = {"recall@5": 40.0, "recall@10": 45.0, "recall@15": 50.0, "em": 10.0, "f1": 20.0, "n_scored": 20}


def run_of(compose, overrides: list[str], path: Path, metrics: dict | None = None) -> RunResult:
    """A run of ``overrides`` on the paper's MuSiQue setting (these tests look at which cell a row gets)."""
    cfg = to_container(validate(compose(overrides)))
    path.mkdir(parents=True, exist_ok=True)
    probe = RunResult(path, cfg, {})
    paper, table, _ = probe.paper_ref("EM" if probe.report.get("qa_paper") else "R@5")
    put_on_paper_setting(path, paper, table, probe.dataset)
    return RunResult(path, cfg, dict(metrics or METRICS))


@pytest.mark.parametrize(("preset", "agent", "label", "paper_r5", "paper_em"), [
    ("table2_baselines", "hipporag", "HippoRAG", 41.0, 8.2),
    ("table2_baselines", "ircot", "IRCoT (BM25)", 46.1, 7.6),
    ("table3_baselines", "hipporag_ircot", "HippoRAG w/ IRCoT", 48.8, 14.2),
    # the GEAR rows of Table 3 keep their recall in Table 2 as well (it had a Table 3 block without paper numbers)
    ("table3_qa", "single", "Hybrid + SyncGE", 48.7, 14.0),
    ("table3_qa", "gear", "GEAR", 58.4, 19.0),
])
def test_table2_and_3_rows_match_the_paper(compose, tmp_path, preset, agent, label, paper_r5, paper_em) -> None:
    run = run_of(compose, [f"experiment={preset}", f"agent={agent}"], tmp_path)
    assert run.method == label
    df = long_table([run]).set_index(["table", "metric"])
    assert df.loc[("Table 2", "R@5"), "paper"] == paper_r5
    assert df.loc[("Table 3", "EM"), "paper"] == paper_em


def test_ircot_with_a_dense_stand_in_is_not_labelled_colbert(compose, tmp_path) -> None:
    run = run_of(compose, ["agent=ircot", "retriever=sbert"], tmp_path)
    assert run.method == "IRCoT (SBERT)"
    assert long_table([run])["paper"].isna().all()


def test_a_flagged_paper_number_is_marked_beside_its_cell_and_footnoted(compose, tmp_path) -> None:
    """GEAR Table 2 prints IRCoT (ColBERTv2)'s 2Wiki R@10 as 86.6, above its R@15 69.7 (one ranking's recall cannot
    fall as k grows: likely a typo, paper_flags.csv): the report keeps the number and marks it, in every format."""
    from gear_repro.reporting.tables import write_tables

    run = run_of(compose, ["experiment=table2_baselines", "agent=ircot", "dataset=2wiki",
                           "report.method='IRCoT (ColBERTv2)'"], tmp_path / "run")
    assert run.method == "IRCoT (ColBERTv2)" and run.dataset == "2Wiki"
    long = long_table([run])
    cells = long.set_index(["table", "metric"])
    assert cells.loc[("Table 2", "R@10"), "paper"] == 86.6 and cells.loc[("Table 2", "R@10"), "paper_flag"] == "†"
    assert cells.loc[("Table 2", "R@15"), "paper"] == 69.7 and pd.isna(cells.loc[("Table 2", "R@15"), "paper_flag"])
    files = write_tables(long, tmp_path / "report")
    md = files["md"].read_text(encoding="utf-8")
    assert "(86.6†, -41.6)" in md and "(69.7, -19.7)" in md
    assert "- † IRCoT (ColBERTv2) on 2Wiki, R@10: the paper's number, shown as printed, is likely a typo" in md
    assert r"86.6\textdagger{}" in files["tex"].read_text(encoding="utf-8")
    flags = pd.read_csv(files["csv"]).set_index(["table", "metric"])["paper_flag"]
    assert flags[("Table 2", "R@10")] == "†" and flags.drop(("Table 2", "R@10")).isna().all()


@pytest.mark.parametrize(("agent", "prompt", "label", "paper_r15"), [
    ("hipporag", "hipporag", "HippoRAG (HippoRAG prompt)", 51.1),
    ("hipporag", "gear", "HippoRAG (GEAR prompt)", 51.4),
    ("hipporag_ircot", "hipporag", "HippoRAG w/ IRCoT (HippoRAG prompt)", 59.3),
    ("hipporag_ircot", "gear", "HippoRAG w/ IRCoT (GEAR prompt)", 58.9),
])
def test_table7_rows(compose, tmp_path, agent, prompt, label, paper_r15) -> None:
    k1 = tmp_path / "extract" / "triples.jsonl"
    run = run_of(compose, ["experiment=table7_triples", f"agent={agent}", f"table7.prompt={prompt}",
                           f"table7.gear_prompt_triples={k1}"], tmp_path, {"recall@15": 50.0, "n_scored": 20})
    assert run.method == label
    assert run.config["dataset"]["triples_file"] == (str(k1) if prompt == "gear" else "triples.jsonl")
    row = long_table([run]).iloc[0]
    assert (row["table"], row["paper"]) == ("Table 7", paper_r15)


def _write_run(root: Path, config: dict, preds: list[dict], metrics: dict) -> RunResult:
    root.mkdir(parents=True)
    (root / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds), encoding="utf-8")
    return RunResult(root, config, metrics)


def test_hipporag_ircot_series_in_fig2_and_fig4(compose, tmp_path) -> None:
    cfg = to_container(validate(compose(["agent=hipporag_ircot"])))
    calls = [{"stage": "ner", "round": 1, "prompt_tokens": 100, "completion_tokens": 10},
             {"stage": "cot", "round": 1, "prompt_tokens": 2000, "completion_tokens": 30},
             {"stage": "ner", "round": 2, "prompt_tokens": 110, "completion_tokens": 12},
             {"stage": "qa", "round": 0, "prompt_tokens": 900, "completion_tokens": 5}]
    preds = [{"id": "q", "gold_ids": ["a"], "rankings": {"final": ["a"]}, "rounds": [{"ranking": ["b"]}, {"ranking": ["a"]}],
              "llm_calls": calls}]
    run = _write_run(tmp_path / "r", cfg, preds, {"recall@15": 100.0, "recall@15_by_round": [0.0, 100.0, 100.0, 100.0]})
    inp, out = cumulative_tokens(preds, 4)
    assert inp == [2100.0, 2210.0, 2210.0, 2210.0] and out == [40.0, 52.0, 52.0, 52.0]  # QA excluded
    figs = tmp_path / "figs"
    figs.mkdir()
    assert [p.name for p in draw_rounds([run], figs)] == ["fig2_r15_by_round_musique.png", "fig2_r15_by_round_musique.pdf"]
    assert [p.name for p in draw_tokens([run], figs)][0] == "fig4_tokens_by_round_musique.png"


@pytest.mark.parametrize(("overrides", "label"), [
    (["agent=gear", "retriever=hybrid"], "GEAR"),
    (["agent=gear", "retriever=griever_k5"], "GEAR + GRIEVER"),
    (["agent=gear", "retriever=bm25"], "GEAR + BM25"),
    (["retriever=griever"], "GRIEVER"),
])
def test_gear_rows_name_a_non_default_base(compose, tmp_path, overrides, label) -> None:
    """GEAR + GRIEVER and GEAR (hybrid base) are two rows, never one label (GRIEVER Table 4)."""
    assert run_of(compose, overrides, tmp_path).method == label


def test_gear_claims_never_take_gear_on_another_base(compose, tmp_path) -> None:
    """The scoreboard's GEAR role is GEAR with the hybrid base; GEAR + GRIEVER only fills its own claim."""
    from gear_repro.reporting.claims import load_claims, matches

    claims = {c["id"]: c for c in load_claims()}
    gear = run_of(compose, ["agent=gear", "retriever=hybrid"], tmp_path)
    gear_griever = run_of(compose, ["agent=gear", "retriever=griever_k5"], tmp_path)
    for cid in ("gear_gt_hipporag_ircot", "gear_fewer_tokens_than_hipporag_ircot", "recall_grows_with_rounds"):
        assert matches(gear, claims[cid]["a"]) and not matches(gear_griever, claims[cid]["a"])
    assert matches(gear_griever, claims["gear_griever_gt_gear_hybrid"]["a"])
    assert matches(gear, claims["gear_griever_gt_gear_hybrid"]["b"])


def test_t2rag_read_by_the_k3_reader_is_its_own_row_outside_t2rag_claims(compose, tmp_path) -> None:
    """agent.answer=false: T²RAG's passages read by the K.3 reader; not T²RAG's own answers (Table 1)."""
    from gear_repro.reporting.claims import load_claims, matches

    own = run_of(compose, ["experiment=t2rag_table1"], tmp_path / "own")
    k3 = run_of(compose, ["experiment=t2rag_table1", "agent.answer=false", "qa=true"], tmp_path / "k3")
    assert (own.method, k3.method) == ("T2RAG", "T2RAG (K.3 reader)")
    claim = next(c for c in load_claims() if c["id"] == "t2rag_gt_standard_rag")
    assert matches(own, claim["a"]) and not matches(k3, claim["a"])
    k3_em = long_table([k3]).query("metric == 'EM'")
    assert k3_em["paper"].isna().all() and (k3_em["paper_source"] == "").all()  # no footnote for absent numbers


@pytest.mark.parametrize(("override", "label"), [
    ("agent.k=10", "T2RAG (k = 10)"), ("agent=t2rag_paper", "T2RAG (reading: paper)"),
    ("agent.answer_parse=reader", "T2RAG (reader answer parse)"), ("agent.carry_fuzzy=true", "T2RAG (carry_fuzzy True)"),
    ("agent.stall_stop=false", "T2RAG (no stall stop)")])
def test_a_t2rag_variant_is_never_beside_the_papers_cell_nor_in_its_claims(compose, tmp_path, override, label) -> None:
    """T²RAG's hooks declared no paper settings, so `experiment=t2rag_table1 agent.k=10` (§5.2: k = 5) sat
    as "T2RAG" beside T²RAG Table 1's GPT-4o-mini EM/F1 and stood for T²RAG in its claims; the paper's reading keeps
    its row (a key set to its reading's own value is no variant)."""
    claim = next(c for c in load_claims() if c["id"] == "t2rag_gt_standard_rag")
    run = run_of(compose, ["experiment=t2rag_table1", override], tmp_path / "v")
    assert run.method == label and not matches(run, claim["a"])
    assert long_table([run]).query("metric == 'EM'")["paper"].isna().all()
    paper = run_of(compose, ["experiment=t2rag_table1", "agent.question_query=true", "agent.k=5"], tmp_path / "p")
    assert paper.method == "T2RAG" and matches(paper, claim["a"])
    assert long_table([paper]).query("metric == 'EM'")["paper"].notna().all()
    prose = run_of(compose, ["experiment=t2rag_table1", "agent=t2rag_paper", "agent.question_query=false"],
                   tmp_path / "r")
    assert prose.method == "T2RAG (reading: paper)"  # question_query false is the paper reading's own value


def test_griever_table4_ircot_rows_fill_their_own_claim(compose, tmp_path) -> None:
    """GRIEVER Table 4's IRCoT arms pair with each other (k=5 per step), never with IRCoT at its default k."""
    from gear_repro.reporting.claims import _same, load_claims, matches

    claim = next(c for c in load_claims() if c["id"] == "ircot_griever_gt_ircot_hybrid")
    griever = run_of(compose, ["experiment=griever_table4_ircot", "retriever=griever_k5"], tmp_path / "g")
    hybrid = run_of(compose, ["experiment=griever_table4_ircot", "retriever=hybrid"], tmp_path / "h")
    default_k = run_of(compose, ["agent=ircot", "retriever=hybrid"], tmp_path / "d")
    assert (griever.method, hybrid.method) == ("IRCoT + GRIEVER", "IRCoT + RRFHybrid")
    assert matches(griever, claim["a"]) and matches(hybrid, claim["b"]) and not matches(griever, claim["b"])
    assert _same(griever, hybrid, claim["same"]) and not _same(griever, default_k, claim["same"])
    paper = long_table([griever]).set_index(["table", "metric"])
    assert paper.loc[("Table 4", "R@5"), "paper"] == 54.98


def test_em_f1_of_another_qa_read_are_not_table_3s_row(compose, tmp_path) -> None:
    """EM/F1 of a run whose K.3 reader read 1 passage, or the k = 10 pass (run.ks without 5),
    stood beside Table 3's "QA top-5 passages" number."""
    base = ["experiment=table3_qa", "agent=single"]
    paper = run_of(compose, base, tmp_path / "p")
    top1 = run_of(compose, [*base, "qa_reader.top_k=1"], tmp_path / "t1")
    k10 = run_of(compose, [*base, "run.ks=[10,15]"], tmp_path / "k10")
    k10.path.mkdir(parents=True, exist_ok=True)
    (k10.path / "predictions.jsonl").write_text(json.dumps({  # a matched-k run: one ranking per pass
        "id": "q", "gold_ids": ["a"], "rankings": {"10": ["a"], "15": ["a"], "final": ["a"]}, "answer": "x",
        "answers": ["x"], "qa_mode": "retrieved"}) + "\n")
    k10.metrics.update(n_scored=1, n_questions=1)
    table = long_table([paper, top1, k10]).set_index(["run_dir", "metric"])
    assert table.loc[(str(paper.path), "EM"), "paper"] == 14.0
    assert table.loc[(str(top1.path), "EM"), "method"] == "Hybrid + SyncGE (QA top 1)"
    assert table.loc[(str(k10.path), "EM"), "method"] == "Hybrid + SyncGE (QA from the k = 10 pass)"
    for run in (top1, k10):
        assert pd.isna(table.loc[(str(run.path), "EM"), "paper"]) and pd.isna(table.loc[(str(run.path), "F1"), "paper"])
    assert table.loc[(str(top1.path), "R@5"), "method"] == "Hybrid + SyncGE"  # its recall is Table 2's row
    claims = {c["id"]: c for c in load_claims()}
    assert matches(paper, claims["gear_gt_hybrid_syncge_qa"]["b"]) and not matches(top1, claims["gear_gt_hybrid_syncge_qa"]["b"])


def test_two_papers_tables_of_one_name_are_two_blocks(compose, tmp_path) -> None:
    """GEAR's Table 2 recall and GRIEVER's Table 2 EM/F1 shared one "Table 2" block."""
    gear_bm25 = run_of(compose, ["retriever=bm25"], tmp_path / "b")
    griever_qa = run_of(compose, ["experiment=griever_table2_qa", "retriever=bm25", "qa=true"], tmp_path / "g")
    long = long_table([gear_bm25, griever_qa])
    blocks = long.groupby("block")["metric"].apply(set).to_dict()
    assert blocks["Table 2"] == {"R@5", "R@10", "R@15"} and blocks["GRIEVER Table 2"] == {"EM", "F1"}
    assert "R@5" in blocks["GRIEVER Table 1"]  # its recall (run.ks of the preset)


def test_qa_pass_note_is_read_from_a_question_that_did_not_error(compose, tmp_path) -> None:
    """An errored first question (its method failed before any k pass: rankings {"final": []}) hid "QA from the k = 10
    pass": the run's EM/F1 stood beside Table 3's top-5-of-k=5 number."""
    k10 = run_of(compose, ["experiment=table3_qa", "agent=single", "run.ks=[10,15]"], tmp_path / "k10")
    k10.path.mkdir(parents=True, exist_ok=True)
    errored = {"id": "q0", "gold_ids": ["a"], "rankings": {"final": []}, "answers": ["x"], "error": "LLMCallError: x"}
    done = {"id": "q1", "gold_ids": ["a"], "rankings": {"10": ["a"], "15": ["a"], "final": ["a"]}, "answer": "x",
            "answers": ["x"], "qa_mode": "retrieved"}
    (k10.path / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in (errored, done)))
    k10.metrics.update(n_scored=2, n_questions=2, n_errors=1)
    assert k10.qa_notes == ("QA from the k = 10 pass",)
    assert pd.isna(long_table([k10]).set_index("metric").loc["EM", "paper"])


def test_a_claims_own_axis_is_the_only_setting_its_runs_may_differ_in(compose, tmp_path) -> None:
    """diversity_helps named no paper_row, so "w/ diversity" (exact scorer) paired with "w/o diversity (fast
    scorer)" (or γ 5, 3 neighbours) and the scorer's effect was scored as diversity's beside Table 4's Δ; recall grows
    with rounds and GEAR + GRIEVER took any GEAR variant. `paper_row: [keys]` admits only the claim's own axis."""
    claims = {c["id"]: c for c in load_claims()}
    div = claims["diversity_helps"]
    with_div = run_of(compose, ["experiment=table4_diversity"], tmp_path / "a")
    assert matches(with_div, div["a"]) and matches(run_of(compose, ["experiment=table4_diversity", "beam=no_diversity"],
                                                           tmp_path / "b"), div["b"])
    for variant in (["beam.scorer=fast"], ["beam.gamma=5", "beam.neighbours=3"]):
        assert not matches(run_of(compose, ["experiment=table4_diversity", "beam=no_diversity", *variant],
                                  tmp_path / "v"), div["b"])
    rounds = claims["recall_grows_with_rounds"]
    assert matches(run_of(compose, ["experiment=table9_beam_rounds", "beam.length=4"], tmp_path / "r"), rounds["a"])
    assert not matches(run_of(compose, ["experiment=table9_beam_rounds", "agent.passage_link=false"], tmp_path / "r"),
                       rounds["a"])
    griever = claims["gear_griever_gt_gear_hybrid"]
    assert matches(run_of(compose, ["experiment=griever_table4_gear", "retriever=griever_k5"], tmp_path / "g"),
                   griever["a"])
    assert not matches(run_of(compose, ["experiment=griever_table4_gear", "retriever=griever_k5", "agent.base_k=5"],
                              tmp_path / "g"), griever["a"])


@pytest.mark.parametrize(("overrides", "label"), [
    (["agent.demos=hotpotqa"], "IRCoT (BM25; hotpotqa demonstrations)"),
    (["agent.demo_files.MuSiQue=2wikimultihopqa"], "IRCoT (BM25; 2wikimultihopqa demonstrations)"),
    (["dataset=2wiki_sample"], "IRCoT (BM25)")])
def test_ircot_with_another_datasets_demonstrations_is_not_the_papers_row(compose, tmp_path, overrides, label) -> None:
    """`agent.demos=hotpotqa` on MuSiQue (HotpotQA's demonstrations) sat as "IRCoT (BM25)" beside Table 2's
    IRCoT cell; the dataset's own demonstrations are a paper setting."""
    run = run_of(compose, ["experiment=table2_baselines", "agent=ircot", *overrides], tmp_path)
    assert run.method == label and run.is_paper_row == (label == "IRCoT (BM25)")
