"""Figures 2-4, Table 12/9 analyses, the --trace walk-through and the report CLI on synthetic runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gear_repro.evaluation.aggregate import aggregate
from gear_repro.reporting.analyses import (
    density_bin,
    density_table,
    format_trace,
    method_tables,
    rounds_table,
    tokens_table,
    triple_density,
)
from gear_repro.reporting.figures import cumulative_tokens, draw_all, legend_inside, spread
from gear_repro.reporting.runs import find_runs
from tests.helpers.paper_setting import put_on_paper_setting

TYPES = ["2hop", "3hop1", "3hop2", "4hop1"]


def make_dataset(root: Path) -> Path:
    """Corpus of 8 passages; passage i has 6 + 2*i triples (densities 6..20)."""
    d = root / "data"
    d.mkdir(parents=True, exist_ok=True)
    (d / "corpus.jsonl").write_text("".join(json.dumps({"id": str(i), "title": f"Title {i}", "text": "x"}) + "\n"
                                            for i in range(8)))
    rows = [{"id": f"{i}-{j}", "subject": "s", "predicate": "p", "object": "o", "passage_id": str(i)}
            for i in range(8) for j in range(6 + 2 * i)]
    (d / "triples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def call(stage: str, rnd: int, pt: int, ct: int) -> dict:
    return {"stage": stage, "round": rnd, "prompt_tokens": pt, "completion_tokens": ct, "cached": False}


def make_run(root: Path, name: str, data: Path, gear: bool, n_q: int = 8, max_rounds: int = 4,
             beam_length: int = 2) -> Path:
    run = root / name
    run.mkdir(parents=True)
    preds = []
    for i in range(n_q):
        gold = [str(i % 8), str((i + 1) % 8)]
        final = [str((i + j) % 8) for j in range(8)] if i % 2 == 0 else [str((i + 3) % 8), str(i % 8)]
        rec = {"id": f"q{i}", "question": f"Question {i}?", "gold_ids": gold, "answers": ["a"],
               "type": TYPES[i % len(TYPES)], "rankings": {"final": final}, "answer": "a" if i % 3 else "b"}
        if gear:
            n = 1 + i % 3
            rec["rounds"] = [{"round": r + 1, "query": f"q{i} r{r + 1}", "base": final[:3],
                              "proximal": [["A", "rel", "B"]], "linked": [{"triple_text": "A rel B"}],
                              "expanded": final[:2], "fused": final[:4], "gist_new": [["A", "rel", "B"]],
                              "memory": [["A", "rel", "B"]] * (r + 1),
                              "reason": {"answerable": r + 1 == n and i % 2 == 0, "parsed": i != 3,
                                         "reason": "why", "raw": "Answerable: No"},
                              "rewrite": {"query": f"q{i} r{r + 2}", "fallback": False} if r + 1 < n else None,
                              "ranking": final[: 2 + 3 * r]} for r in range(n)]
            rec["trace"] = {"agent": "gear", "stop": "answerable" if i % 2 == 0 else "max_rounds",
                            "counters": {"reason_unparsed": int(i == 3), "rewrite_fallback": 0}}
            rec["llm_calls"] = [c for r in range(1, n + 1) for c in
                                (call("read", r, 1000, 50), call("gist", r, 1200, 60), call("reason", r, 200, 20))]
            rec["llm_calls"] += [call("qa", 0, 900, 5)]
        else:
            rec["llm_calls"] = [call("read", 0, 1000, 50), call("qa", 0, 900, 5)]
        preds.append(rec)
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    metrics = aggregate(preds, [5, 10, 15], max_rounds=max_rounds if gear else None)
    (run / "metrics.json").write_text(json.dumps(metrics))
    cfg = {"dataset": {"name": "musique_sample", "paper_name": "MuSiQue", "path": str(data),
                       "triples_file": "triples.jsonl", "max_rounds": 4},
           "retriever": {"name": "hybrid"}, "expansion": {"name": "sync"}, "beam": {"length": beam_length},
           "agent": {"name": "gear", "max_rounds": max_rounds} if gear else {"name": "single"},
           "report": {}, "qa": True}
    (run / "config.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    put_on_paper_setting(run)  # these tests look at the paper's cells, not at the placement rule
    return run


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    data = make_dataset(tmp_path)
    make_run(tmp_path / "runs", "gear", data, gear=True)
    make_run(tmp_path / "runs", "sync", data, gear=False)
    return tmp_path / "runs"


def test_draw_all_writes_png_and_pdf(runs_dir: Path, tmp_path: Path):
    paths = draw_all(find_runs([runs_dir]), tmp_path / "fig")
    names = {p.name for p in paths}
    for stem in ("fig2_r15_by_round_musique", "fig3_r15_by_type_musique", "fig4_tokens_by_round_musique"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000
    assert (tmp_path / "fig" / "fig2_r15_by_round_musique.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig" / "fig2_r15_by_round_musique.pdf").read_bytes()[:4] == b"%PDF"


def test_figures_skip_what_runs_cannot_support(tmp_path: Path):
    data = make_dataset(tmp_path)
    run = make_run(tmp_path / "runs", "sync", data, gear=False)
    (run / "predictions.jsonl").unlink()
    names = {p.name for p in draw_all(find_runs([tmp_path / "runs"]), tmp_path / "fig")}
    assert names == {"fig3_r15_by_type_musique.png", "fig3_r15_by_type_musique.pdf"}  # from metrics['by_type']


def _with_ks(run: Path, ks: list[int]) -> None:
    """The run as if run with ``run.ks=ks`` (its metrics aggregated at those ranks)."""
    preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    (run / "metrics.json").write_text(json.dumps(aggregate(preds, ks, max_rounds=4)))
    cfg = json.loads((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(json.dumps(cfg | {"run": {"ks": ks}}))


def test_figure_2_draws_a_run_whose_largest_k_is_not_15_and_names_one_without_it(tmp_path: Path):
    """Runs with run.ks [5, 10, 15, 20] (metrics: recall@20_by_round) and [5, 10] were left out of Figure 2
    silently; the first is drawn from its predictions, the second named in figures.md."""
    data = make_dataset(tmp_path)
    _with_ks(make_run(tmp_path / "runs", "gear_k20", data, gear=True), [5, 10, 15, 20])
    _with_ks(make_run(tmp_path / "runs", "gear_k10", data, gear=True), [5, 10])
    runs = find_runs([tmp_path / "runs"])
    assert "recall@15_by_round" not in runs[0].metrics
    names = {p.name for p in draw_all(runs, tmp_path / "fig")}
    assert "fig2_r15_by_round_musique.png" in names and "figures.md" in names
    note = (tmp_path / "fig" / "figures.md").read_text()
    assert "Figure 2 (MuSiQue): GEAR [run.ks=[5, 10]] (gear_k10) is left out: R@15 is not among its run.ks [5, 10]" in note
    assert "Figure 3 (MuSiQue): GEAR [run.ks=[5, 10]] (gear_k10) is left out" in note and "gear_k20" not in note


def test_round_one_labels_are_spread_apart_in_order():
    """Fig. 2's round-1 value labels: 58.8 and 58.7 (two runs) no longer print on top of each other."""
    ys = spread([58.8, 80.0, 58.7, 55.4], gap=2.0)
    assert ys == pytest.approx([60.225, 79.525, 58.225, 54.925])  # pushed 2.0 apart, then shifted by the mean
    assert sorted(range(4), key=lambda i: ys[i]) == [3, 2, 0, 1]  # the order of the values is kept
    gaps = [b - a for a, b in zip(sorted(ys)[:-1], sorted(ys)[1:], strict=True)]
    assert min(gaps) >= 2.0 - 1e-9
    assert sum(ys) == pytest.approx(sum([58.8, 80.0, 58.7, 55.4]))
    assert spread([10.0, 50.0], gap=2.0) == [10.0, 50.0]


def test_legend_leaves_the_axes_for_many_or_long_entries():
    # a row tag ("GRIEVER [retriever.scoring_query=original]") inside Fig. 3 covered the 2-hop whiskers
    assert legend_inside(["GEAR", "Hybrid + SyncGE", "Mean (95% CI)"])
    assert not legend_inside(["GRIEVER [retriever.scoring_query=original]", "Mean (95% CI)"])
    assert not legend_inside([f"run {i}" for i in range(5)])


def test_cumulative_tokens_per_round():
    preds = [{"llm_calls": [call("read", 1, 100, 10), call("gist", 2, 50, 5), call("qa", 0, 999, 9)]},
             {"llm_calls": [call("read", 0, 40, 4)]}]  # single-step round 0 counts at n=1
    inp, outp = cumulative_tokens(preds, 3)
    assert inp == [70.0, 95.0, 95.0] and outp == [7.0, 9.5, 9.5]


def test_density_table(runs_dir: Path):
    assert triple_density(["0", "1"], {"0": 6, "1": 8}) == 7
    assert [density_bin(x) for x in (8.9, 9, 10.99, 11, 12.5, 13, 40)] == [
        "rho<9", "9<=rho<11", "9<=rho<11", "11<=rho<13", "11<=rho<13", "13<=rho", "13<=rho"]
    df = density_table(find_runs([runs_dir]))
    assert set(df["metric"]) == {"R@15 rho<9", "R@15 9<=rho<11", "R@15 11<=rho<13", "R@15 13<=rho"}
    gear = df[df.method == "GEAR"].set_index("metric")
    # q0: gold 0,1 -> rho 7; q1: 1,2 -> 9; q2: 2,3 -> 11; q3..: >= 13; q7: 7,0 -> 13
    assert gear.loc["R@15 rho<9", "n_in_bin"] == 1 and gear.loc["R@15 13<=rho", "n_in_bin"] == 5
    assert gear.loc["R@15 rho<9", "paper"] == 73.6 and gear.loc["R@15 rho<9", "ours"] == 100.0
    assert gear["n_in_bin"].sum() == 8


def test_rounds_table_and_agent_stats(runs_dir: Path, tmp_path: Path):
    runs = find_runs([runs_dir])
    df = rounds_table(runs)
    assert sorted(df["max_rounds"].unique()) == [1, 2, 3, 4]
    cell = df[(df.max_rounds == 1) & (df.metric == "R@15")].iloc[0]
    assert cell["paper"] == 69.5 and cell["derived_from_rounds"]
    assert df[(df.max_rounds == 4)]["derived_from_rounds"].eq(False).all()
    gear_metrics = next(r for r in runs if r.method == "GEAR").metrics
    assert df[(df.max_rounds == 4) & (df.metric == "R@15")].iloc[0]["ours"] == pytest.approx(
        gear_metrics["recall@15_by_round"][3], abs=0.01)
    stats = next(t for stem, _, t in method_tables(runs) if stem == "agent_stats").iloc[0]  # GEAR's report hooks
    assert stats["n_questions"] == 8 and stats["reason_unparsed"] == 1
    assert stats["stop_answerable"] + stats["stop_max_rounds"] == 8
    tok = tokens_table(runs)
    assert set(tok[tok.method == "GEAR"]["stage"]) == {"read", "gist", "reason", "qa"}


def test_trace_walkthrough_and_cli(runs_dir: Path, tmp_path: Path, capsys):
    from gear_repro.cli.report import main

    pred = json.loads((runs_dir / "gear" / "predictions.jsonl").read_text().splitlines()[2])
    text = format_trace(pred, {"2": "Title 2"})
    assert "== Round 3 ==" in text and "Gist memory G(3)" in text and "Rewriter -> next query: q2 r3" in text
    assert "P1 Title 2 *" in text and "R@15" in text
    assert main([str(runs_dir), "--trace", "q2"]) == 0
    out = capsys.readouterr().out
    assert "Question q2" in out and "Reasoner: answerable=True" in out
    assert main([str(runs_dir), "--trace", "nope"]) == 2
    (runs_dir / "gear" / "metrics.json").unlink()  # an unfinished run still prints its walk-through
    assert main([str(runs_dir / "gear"), "--trace", "q2"]) == 0 and "Question q2" in capsys.readouterr().out
    make_run(tmp_path / "again", "gear", make_dataset(tmp_path / "d2"), gear=True)
    runs_dir = tmp_path / "again"
    assert main([str(runs_dir), "--out", str(tmp_path / "rep"), "--figures"]) == 0
    out = capsys.readouterr().out
    for f in ("table.md", "table12_density.csv", "table12_density_wide.md", "table9_rounds.csv",
              "tokens_by_stage.md", "agent_stats.md", "fig4_tokens_by_round_musique.pdf"):
        assert (tmp_path / "rep" / f).exists(), f
    assert "Table 12" in out and "figure:" in out


def test_the_walkthrough_of_a_failed_question_says_it_failed() -> None:
    """`--trace` of an errored question printed an empty ranking and "R@5 0" with no word of its error."""
    pred = {"id": "q1", "question": "Who?", "answers": ["x"], "type": "2hop", "gold_ids": ["1"],
            "rankings": {"final": []}, "error": "LLMCallError: LLM call to m failed (non-retryable): UnicodeDecodeError"}
    text = format_trace(pred)
    assert "FAILED (scored as a miss" in text and "UnicodeDecodeError" in text and "R@5 0" in text
    assert "FAILED" not in format_trace({**pred, "error": None})


def _capture(monkeypatch) -> dict:
    """The figures' axes by file stem (``_save`` records them before writing)."""
    from gear_repro.reporting import figures

    seen: dict = {}
    save = figures._save

    def spy(fig, out, stem):
        ax = fig.axes[0]
        seen[stem] = {"ylim": ax.get_ylim(), "ylabel": ax.get_ylabel(), "title": ax.get_title(),
                      "width_in": fig.get_size_inches()[0],
                      "y": [y for line in ax.get_lines() for y in line.get_ydata()],
                      "legend_size": ax.get_legend().get_texts()[0].get_fontsize() if ax.get_legend() else None,
                      "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
                      "texts": [t.get_text() for t in ax.texts]}
        return save(fig, out, stem)

    monkeypatch.setattr(figures, "_save", spy)
    return seen


def test_a_small_run_stays_off_the_axes_of_large_ones_and_fig3_is_in_percent(tmp_path: Path, monkeypatch) -> None:
    """A 3-question run drawn beside a 30-question one read as a result (fig 3 titled 'N=3/30'); it is now left out
    and named in figures.md. Fig. 3 was on a 0-1 axis (every table is 0-100), 21 in wide with 8 methods and a
    legend of 7 pt; it is in percent, at most 14 in wide, its legend 9 pt, its title the plotted runs' N."""
    seen = _capture(monkeypatch)
    data = make_dataset(tmp_path)
    make_run(tmp_path / "runs", "gear", data, gear=True, n_q=30)
    make_run(tmp_path / "runs", "sync", data, gear=False, n_q=3)
    draw_all(find_runs([tmp_path / "runs"]), tmp_path / "fig")
    note = (tmp_path / "fig" / "figures.md").read_text()
    assert "Figure 3 (MuSiQue): Hybrid + SyncGE (sync) is left out: 3 questions (fewer than 20; the other runs have 30 or more)" in note
    assert "Figure 4 (MuSiQue): Hybrid + SyncGE (sync) is left out: 3 questions" in note
    fig3 = seen["fig3_r15_by_type_musique"]
    assert fig3["ylim"] == (-5, 105) and fig3["ylabel"] == "R@15 (%)" and fig3["width_in"] <= 14
    assert "(N=30;" in fig3["title"] and "3/30" not in fig3["title"]
    assert max(fig3["y"]) > 1 and max(fig3["y"]) <= 100 and fig3["legend_size"] == 9
    assert "N=30" in seen["fig2_r15_by_round_musique"]["title"]


def test_figures_of_small_runs_only_say_examples_only(runs_dir: Path, tmp_path: Path, monkeypatch) -> None:
    seen = _capture(monkeypatch)
    draw_all(find_runs([runs_dir]), tmp_path / "fig")
    assert not (tmp_path / "fig" / "figures.md").exists()  # nothing left out: every run is as small
    for stem in ("fig2_r15_by_round_musique", "fig3_r15_by_type_musique", "fig4_tokens_by_round_musique"):
        assert "N=8: examples only, < 20 questions" in seen[stem]["title"], stem
    # Fig. 2's single-step reference line is named in the legend and carries only its value: its label with the
    # run's tag, right-aligned at the last round, ran past the left edge of the axes
    fig2 = seen["fig2_r15_by_round_musique"]
    assert "Hybrid + SyncGE (single-step)" in fig2["legend"]
    assert not [t for t in fig2["texts"] if "SyncGE" in t and not t.startswith("paper")]
