"""The runner end to end on a toy dataset: outputs, resume, config errors, report tables."""

from __future__ import annotations

import json

import pytest
from hydra.errors import ConfigCompositionException

from gear_repro.cli.report import main as report_main
from gear_repro.pipeline.runner import Runner
from gear_repro.utils.errors import ConfigError


def _cfg(compose, toy_dir, *extra):
    return compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", *extra])


def test_bm25_run_writes_outputs(compose, toy_dir, tmp_path):
    cfg = _cfg(compose, toy_dir, "retriever=bm25")
    m = Runner(cfg, tmp_path / "run").run()
    run = tmp_path / "run"
    assert {"config.yaml", "run.json", "predictions.jsonl", "metrics.json"} <= {p.name for p in run.iterdir()}
    assert m["n_questions"] == 3
    preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    assert preds[1]["rankings"]["final"][0] == "1"  # "capital of Germany" -> Berlin
    prov = json.loads((run / "run.json").read_text())
    assert prov["data_hashes"]["corpus"] and prov["environment"]["packages"]["bm25s"]
    assert prov["index_hashes"]["passages"]
    assert prov["method"] == {"name": "single", "output_depth": None, "save_depth": 100, "k_dependent": False,
                              "expansion": {"name": "none"}}  # describe() (every setting) reaches run.json
    # what the report needs of the run's classes, recorded rather than re-imported later
    assert prov["report_flags"] == {"k_dependent": False, "needs_vectors": False, "figure2_reference": False}
    assert not (run / "config.yaml.json").exists()
    assert json.loads((run / "metrics.json").read_text())["recall@5"] == pytest.approx(m["recall@5"])


def test_resume_skips_finished_questions(compose, toy_dir, tmp_path):
    run = tmp_path / "run"
    Runner(_cfg(compose, toy_dir, "retriever=bm25", "dataset.limit=2"), run).run()
    first = (run / "predictions.jsonl").read_text().splitlines()
    # simulate a crash mid-write: a partial trailing line must be dropped, not break the run
    with open(run / "predictions.jsonl", "a") as f:
        f.write('{"id": "q3", "trunc')
    m = Runner(_cfg(compose, toy_dir, "retriever=bm25"), run).run()
    lines = (run / "predictions.jsonl").read_text().splitlines()
    assert lines[:2] == first  # finished questions untouched
    assert len(lines) == 3 and m["n_questions"] == 3


def test_resume_refuses_a_different_config(compose, toy_dir, tmp_path):
    run = tmp_path / "run"
    Runner(_cfg(compose, toy_dir, "retriever=bm25"), run).run()
    with pytest.raises(ConfigError, match="different config"):
        Runner(_cfg(compose, toy_dir, "retriever=bm25", "run.ks=[1,2]"), run).run()


def test_unknown_config_values_fail_clearly(compose, toy_dir, tmp_path):
    with pytest.raises(ConfigCompositionException, match="retriever"):
        compose(["retriever=colbert"])
    with pytest.raises(ConfigCompositionException, match="limt"):  # misspelt key: the schema rejects it
        _cfg(compose, toy_dir, "dataset.limt=3")
    with pytest.raises(ConfigError, match="stage"):
        Runner(_cfg(compose, toy_dir, "stage=train"), tmp_path / "r2")


def test_missing_dataset_is_a_clear_error(compose, tmp_path):
    from gear_repro.utils.errors import DataError

    cfg = compose([f"dataset.path={tmp_path}/nope", "retriever=bm25", "run.progress=false"])
    with pytest.raises(DataError, match="nope"):
        Runner(cfg, tmp_path / "r").run()


def test_report_tables_with_paper_numbers(compose, toy_dir, tmp_path, capsys):
    for ret in ("bm25",):
        cfg = _cfg(compose, toy_dir, f"retriever={ret}", "dataset.paper_name=MuSiQue")
        Runner(cfg, tmp_path / "runs" / ret).run()
    assert report_main([str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 0
    import pandas as pd

    df = pd.read_csv(tmp_path / "rep" / "table.csv")
    row = df[(df.method == "BM25") & (df.metric == "R@5")].iloc[0]
    # GEAR Table 2, BM25, MuSiQue, R@5: the toy corpus is not the paper's, so the number stands apart, no Δ
    assert pd.isna(row.paper) and pd.isna(row.delta) and row.paper_other_setting == pytest.approx(33.8)
    assert row.setting_differs.startswith("corpus 6 vs 148,793 passages; questions 3")
    assert "BM25" in (tmp_path / "rep" / "table.md").read_text()
    assert "\\begin{tabular}" in (tmp_path / "rep" / "table.tex").read_text()
    assert report_main([str(tmp_path / "empty_nothing")]) == 2


@pytest.mark.slow
def test_run_json_records_hub_statistics_and_gamma(compose, toy_dir, tmp_path):
    """GraphExpansion.describe() (γ, fusion order, the triple graph's hub statistics) lands in run.json."""
    from gear_repro.pipeline.resources import Resources

    cfg = _cfg(compose, toy_dir, "retriever=bm25", "expansion=naive", "beam.scorer=mean", "dataset.limit=1",
               "embedder=minilm", "embedder.show_progress=false")
    res = Resources(cfg)
    Runner(cfg, tmp_path / "run", resources=res).run()
    exp = json.loads((tmp_path / "run" / "run.json").read_text())["method"]["expansion"]
    assert exp["beam"]["gamma_value"] == 20 and exp["fusion_order"] == "base_first"
    assert exp["graph"]["max_degree"] is None and exp["graph"]["triples"] == len(res.dataset.triples)
