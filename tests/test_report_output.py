"""Reports: runs sharing a label are told apart in every table keyed by label, and a report replaces its
--out as a whole (nothing stale kept, foreign files refused, what was written listed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gear_repro.cli.report import main as report_main
from gear_repro.pipeline.runner import Runner
from gear_repro.reporting.output import MANIFEST
from tests.helpers.cli import run_cli, toy_args


@pytest.fixture
def two_widths(compose, toy_dir: Path, tmp_path: Path) -> Path:
    """A beam.width=3,10 sweep of BM25 on the toy data: two runs labelled "BM25"."""
    sweep = tmp_path / "sweep"
    for i, width in enumerate((3, 10)):
        Runner(compose(toy_args(toy_dir, f"beam.width={width}")), sweep / f"{i}_toy").run()
    return sweep


def test_tables_keyed_by_label_tell_runs_apart(two_widths: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
    for name in ("table.md", "table12_density_wide.md", "table.tex"):
        text = (out / name).read_text()
        assert "BM25 [beam.width=3]" in text and "BM25 [beam.width=10]" in text, name
    csv = (out / "table.csv").read_text()
    assert csv.count("BM25 [beam.width=3]") == csv.count("BM25 [beam.width=10]") > 0


def test_reused_out_keeps_nothing_stale_and_lists_what_it_wrote(two_widths: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100", "--claims"]) == 0
    assert (out / "claims.md").exists()
    capsys.readouterr()
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
    listed = json.loads((out / MANIFEST).read_text())["files"]
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert listed == on_disk and "table.md" in listed
    assert not (out / "claims.md").exists()
    assert f"wrote {len(listed)} files to {out}/" in capsys.readouterr().out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report.")]  # no staging folder left


def test_out_holding_other_files_is_refused(two_widths: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    assert report_main([str(two_widths), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --out {out} holds {out / 'notes.txt'}, which no report wrote; a report replaces its "
                   "folder as a whole: use a new or empty folder")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_files_named_like_a_reports_are_never_deleted(two_widths: Path, tmp_path: Path, capsys) -> None:
    """A folder of the user's ``fig1.pdf table_main.tex claims.docx cost.xlsx table.xlsx`` was replaced by a report
    (exit 0, the files gone): names like the report's outputs counted as the report's. Only the files a folder's
    own report_files.json lists are replaced, with or without one."""
    mine = ["fig1.pdf", "table_main.tex", "claims.docx", "cost.xlsx", "table.xlsx"]
    for with_manifest in (False, True):
        out = tmp_path / f"paper{with_manifest}"
        if with_manifest:  # an earlier report, then the user's files beside it
            assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
        out.mkdir(exist_ok=True)
        for name in mine:
            (out / name).write_text("the user's")
        capsys.readouterr()
        assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 2
        assert "which no report wrote" in capsys.readouterr().err
        assert all((out / name).read_text() == "the user's" for name in mine)


def test_out_dot_and_a_killed_reports_staging_folder(two_widths: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """``--out .`` failed with "PosixPath('.') has an empty name"; it is now refused with a message (a report
    replaces its folder: the working folder would move away), and ``--out ..`` too. A killed report's hidden
    ``.<out>.tmp-<pid>-*`` folder is removed by the next report into that folder (another live report's is kept)."""
    import os

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for out in (".", ".."):
        assert report_main([str(two_widths), "--out", out, "--resamples", "100"]) == 2
        err = capsys.readouterr().err
        assert f"error: --out {out} is the folder the report runs in" in err and "--out report" in err, err
    dead = 2**22 + 17  # above pid_max's default: no such process
    killed = tmp_path / f".report.tmp-{dead}-abc"
    (killed / "explorer").mkdir(parents=True)
    (killed / "table.md").write_text("half")
    live = tmp_path / f".report.tmp-{os.getppid()}-xyz"
    live.mkdir()
    assert report_main([str(two_widths), "--out", str(tmp_path / "report"), "--resamples", "100"]) == 0
    assert not killed.exists() and live.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report.")) == [live.name]


def test_extraction_and_index_runs_are_not_listed_as_unfinished(tmp_path: Path) -> None:
    """A finished stage=extract or stage=index run has no metrics.json by design (make demo's report listed its
    extraction run as an unfinished "Hybrid" run); a retrieval run without metrics.json is listed."""
    from gear_repro.reporting.runs import find_unfinished

    for name, stage in (("extract", "extract"), ("index", "index"), ("killed", "retrieve")):
        d = tmp_path / name
        d.mkdir()
        (d / "config.yaml").write_text(f"stage: {stage}\nretriever: {{name: hybrid}}\n", encoding="utf-8")
        (d / "run.json").write_text("{}", encoding="utf-8")
    assert [u.path.name for u in find_unfinished([tmp_path])] == ["killed"]


def test_tags_name_what_was_run_before_the_reports_labels() -> None:
    from gear_repro.reporting.runs import RunResult, tag_runs

    def run(name: str, **config) -> RunResult:
        base = {"dataset": {"name": "musique_sample", "paper_name": "MuSiQue"}, "retriever": {"name": "bm25"},
                "agent": {"name": "single"}}
        return RunResult(Path(name), {**base, **config}, {})

    # a preset's label maps and table sort first alphabetically; the setting that was run must lead the tag
    runs = [run("a", report={"labels": {"bm25": "BM25", "sbert": "SBERT", "hybrid": "Hybrid"}, "table": "Table 1"},
                run={"ks": [5]}),
            run("b", report={}, run={"ks": [5, 10, 15]})]
    tag_runs(runs)
    assert runs[0].tag == "run.ks=[5], report.table=Table 1, report.labels.bm25=BM25, ..."
    assert runs[1].tag == "run.ks=[5, 10, 15], report.table=unset, report.labels.bm25=unset, ..."


def test_a_configuration_keeps_one_row_across_datasets_and_tags_name_only_used_settings(tmp_path: Path) -> None:
    """MuSiQue's default BM25 was "BM25 [run.ks=[5, 10, 15]]" (another MuSiQue BM25 had other
    ks) while the same BM25 on HotpotQA was the row "BM25"; and a BM25 run without an LLM was tagged by llm.model."""
    from gear_repro.reporting.runs import RunResult, tag_runs

    def run(name: str, dataset: str, built_llm: bool = False, **config) -> RunResult:
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text("{}", encoding="utf-8")
        if built_llm:
            (d / "llm_stats.json").write_text("{}", encoding="utf-8")
        base = {"dataset": {"name": dataset, "paper_name": dataset}, "retriever": {"name": "bm25"},
                "agent": {"name": "single"}}
        return RunResult(d, {**base, **config}, {})

    runs = [run("mq", "MuSiQue", run={"ks": [5, 10, 15]}, llm={"model": "a"}),
            run("mq25", "MuSiQue", run={"ks": [5, 25]}, llm={"model": "b"}),
            run("hp", "HotpotQA", run={"ks": [5, 10, 15]}, llm={"model": "c"})]
    tag_runs(runs)
    assert [r.label for r in runs] == ["BM25 [run.ks=[5, 10, 15]]", "BM25 [run.ks=[5, 25]]", "BM25 [run.ks=[5, 10, 15]]"]
    used = [run("qa_a", "MuSiQue", True, llm={"model": "a"}, qa=True), run("qa_b", "MuSiQue", True, llm={"model": "b"}, qa=True)]
    tag_runs(used)
    assert [r.tag for r in used] == ["llm.model=a", "llm.model=b"]


def test_out_is_readable_by_others_and_a_symlinked_out_keeps_its_link(two_widths: Path, tmp_path: Path) -> None:
    """The report folder had mkdtemp's mode 0700 (a shared drive's readers were kept out), and a symlinked --out
    was replaced by a folder, its target left empty and a stale .old link beside it."""
    import os
    import stat

    from gear_repro.utils.io import UMASK

    out = tmp_path / "report"
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~UMASK
    target = tmp_path / "shared" / "reports"
    target.mkdir(parents=True)
    link = tmp_path / "linkout"
    link.symlink_to(target, target_is_directory=True)
    for _ in range(2):  # the second replaces the first through the link
        assert report_main([str(two_widths), "--out", str(link), "--resamples", "100"]) == 0
    assert link.is_symlink() and (target / "table.md").is_file()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no stale .linkout.old-* left
    assert os.listdir(tmp_path / "shared") == ["reports"]


def test_too_few_resamples_are_refused(two_widths: Path, tmp_path: Path, capsys) -> None:
    """--resamples 1 gave a "95 %" interval of one draw."""
    assert report_main([str(two_widths), "--out", str(tmp_path / "r"), "--resamples", "5"]) == 2
    assert "--resamples must be at least 100" in capsys.readouterr().err


def test_latency_p50_is_the_median() -> None:
    from gear_repro.evaluation.aggregate import aggregate

    preds = [{"id": f"q{i}", "gold_ids": ["a"], "rankings": {"final": ["a"]}, "timings": {"total_s": t}}
             for i, t in enumerate((1.0, 3.0))]
    assert aggregate(preds, [5])["latency_ms"]["p50"] == 2000.0  # was the upper one (3000) for two questions


def test_latency_p95_is_the_cost_tables_p95() -> None:
    """metrics.json's p95 took index int(0.95 n): the slowest question for n <= 20 (the LLM subsets), where the cost
    table's np.percentile gives another number for the same run."""
    import numpy as np

    from gear_repro.evaluation.aggregate import aggregate

    secs = [float(i) for i in range(1, 21)]
    preds = [{"id": f"q{i}", "gold_ids": ["a"], "rankings": {"final": ["a"]}, "timings": {"total_s": t}}
             for i, t in enumerate(secs)]
    p95 = aggregate(preds, [5])["latency_ms"]["p95"]
    assert p95 == pytest.approx(1000 * np.percentile(secs, 95)) and p95 < 20000.0  # was 20000 (the maximum)


def test_a_sweep_stopped_by_a_job_refused_at_start_up_is_listed_by_the_report(toy_dir: Path, tmp_path: Path) -> None:
    """`-m dataset.limit=2,-1,3`: job 1 is refused at start-up (its dir held only run.log) and Hydra's basic launcher
    never starts job 2; the report listed neither, so the sweep read as one finished run. Now job 1 has its
    failure.json and the sweep says how many of its jobs have no dir."""
    from gear_repro.reporting.runs import find_unfinished, sweep_size


    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *toy_args(toy_dir, "dataset.limit=2,-1,3"), f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 2 and "dataset.limit must be >= 1 (got -1)" in proc.stderr, proc.stderr
    assert sweep_size(sweep / "multirun.yaml") == 3
    unfinished = {u.path.relative_to(sweep).as_posix(): u.error for u in find_unfinished([sweep])}
    failed = next(e for p, e in unfinished.items() if p.startswith("1_"))
    assert failed == "ConfigError: dataset.limit must be >= 1 (got -1)"
    assert unfinished["."].startswith("1 of the sweep's 3 jobs has no job dir")
    assert len(unfinished) == 2  # job 0 finished


@pytest.mark.parametrize("text", ["retriever: [\n", "", "- a list\n"])
def test_a_run_dir_whose_config_is_not_yaml_is_one_line_naming_it(two_widths: Path, tmp_path: Path, capsys,
                                                                   text: str) -> None:
    """A config.yaml cut short or edited by hand: the report died in an 18-frame YAML traceback; an empty one made a
    row "?" under a dataset "?". Now one line naming the file."""
    bad = two_widths / "1_toy" / "config.yaml"
    bad.write_text(text, encoding="utf-8")
    assert report_main([str(two_widths), "--out", str(tmp_path / "report"), "--resamples", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad}: ") and "\n" not in err and "Traceback" not in err, err


def test_passages_dropped_to_fit_the_context_window_are_warned_and_noted(toy_dir: Path, tmp_path: Path,
                                                                          capsys) -> None:
    """With llm.context_window just above the QA prompt's demonstrations, the K.3 reader saw 0-1 of its top-5
    passages: counted in metrics.json only, while the run printed no warning and the report tabled its EM/F1 as the
    paper's row without a word. Now both say so."""

    from tests.helpers.standin_server import StandInServer

    run = tmp_path / "run"
    with StandInServer(latency_s=0.0) as server:
        r = run_cli(toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=standin", f"llm.base_url={server.url}",
                             "llm.cache=false", "llm.context_window=1960", f"hydra.run.dir={run}"), tmp_path)
    assert r.returncode == 0, r.stderr
    dropped = json.loads((run / "metrics.json").read_text())["agent_stats"]["qa_context_dropped_passages"]
    assert dropped > 0
    assert (f"WARNING: passages dropped to fit llm.context_window=1960 (qa_context_dropped_passages={dropped})"
            in r.stderr)
    assert report_main([str(run), "--out", str(tmp_path / "report"), "--resamples", "100"]) == 0
    assert (f"warning: {run}: passages dropped to fit llm.context_window=1960 (qa_context_dropped_passages="
            f"{dropped}): its prompts read fewer passages" in capsys.readouterr().err)


def test_a_refusal_at_start_up_leaves_a_live_runs_dir_alone(toy_dir: Path, tmp_path: Path) -> None:
    """The start-up failure.json is never written into a dir another live process holds (its report would show
    the refused command's error as that run's)."""
    from gear_repro.utils.lock import RunDirLock


    sweep = tmp_path / "sweep"
    run = sweep / "0_toy_bm25+none+single"  # the job's dir (configs/config.yaml hydra.sweep.subdir)
    run.mkdir(parents=True)
    with RunDirLock(run):  # held by this (live) process
        proc = run_cli(["-m", *toy_args(toy_dir, "dataset.limit=-1"), f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 2 and "dataset.limit must be >= 1" in proc.stderr, proc.stderr
    assert (run / "run.log").exists() and not (run / "failure.json").exists()


@pytest.mark.parametrize("stem", ["failures", "cost", "claims", "table12_density", "tokens_by_stage", "ircot_stats"])
def test_a_stem_taken_by_another_file_of_the_report_is_refused(two_widths: Path, tmp_path: Path, capsys,
                                                                stem: str) -> None:
    """--stem failures wrote Table 2 into failures.md (the failures gone), --stem table12_density lost Table 2 under
    Table 12, --stem claims lost it under the scoreboard, --stem cost died in a pandas KeyError."""
    out = tmp_path / "report"
    assert report_main([str(two_widths), "--out", str(out), "--stem", stem, "--claims"]) == 2
    assert capsys.readouterr().err.startswith(f"error: --stem {stem} is the name of another file of the report")
    assert not (out / "table.md").exists()
    assert report_main([str(two_widths), "--out", str(out), "--stem", "my_table", "--resamples", "100"]) == 0
    assert "BM25" in (out / "my_table.md").read_text()


def test_a_run_naming_an_unknown_paper_fails_before_any_work(toy_dir: Path, tmp_path: Path) -> None:
    """The run CLI and the Python API refuse a misspelt paper at start-up, not after the run at its report."""
    from gear_repro.api import compose as api_compose
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="report.paper='GEARR' is not a paper of paper_results.csv"):
        api_compose(*toy_args(toy_dir, "report.paper=GEARR"))
    run = tmp_path / "run"
    proc = run_cli([*toy_args(toy_dir, "report.paper=GEARR"), f"hydra.run.dir={run}"], tmp_path)
    assert proc.returncode == 2 and "report.paper='GEARR' is not a paper" in proc.stderr, proc.stderr
    assert not (run / "predictions.jsonl").exists()


@pytest.mark.parametrize(("override", "msg"), [
    ("report.paper=GEARR", "report.paper='GEARR' is not a paper of paper_results.csv (papers: GEAR, GRIEVER"),
    ("report.qa_paper=T2-RAG", "report.qa_paper='T2-RAG' is not a paper of paper_results.csv"),
])
def test_report_refuses_a_run_naming_an_unknown_paper(compose, toy_dir: Path, tmp_path: Path, capsys,
                                                      override: str, msg: str) -> None:
    """The paper names are the report's concern: the run records them, the report CLI checks them (naming the run's
    config.yaml) before writing anything."""
    run = tmp_path / "runs" / "0_toy"
    Runner(compose(toy_args(toy_dir, override)), run).run()
    out = tmp_path / "report"
    assert report_main([str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {run / 'config.yaml'}: {msg}"), err
    assert not (out / "table.md").exists()


def test_a_file_written_into_out_while_the_report_runs_is_kept(two_widths: Path, tmp_path: Path, capsys,
                                                              monkeypatch) -> None:
    """Ownership of ``--out`` was checked only at the start: a file written into it while the report ran was
    deleted with the earlier report. It is checked again before publishing (the report stops, naming the file), and
    a file that slips in between that check and the swap is moved into the new report folder, never deleted."""
    import os

    import gear_repro.cli.report as R
    import gear_repro.reporting.output as O

    out = tmp_path / "report"
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
    earlier = (out / "table.md").read_text()
    real_write = R.write_report

    def user_writes_meanwhile(*a, **k):
        real_write(*a, **k)
        (out / "notes.txt").write_text("my notes")

    monkeypatch.setattr(R, "write_report", user_writes_meanwhile)
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 2
    assert (f"--out {out} holds {out / 'notes.txt'}, which no report wrote (written while this report ran; the "
            "report was not written)") in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "my notes" and (out / "table.md").read_text() == earlier
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []

    (out / "notes.txt").unlink()
    monkeypatch.setattr(R, "write_report", real_write)
    real_rename = os.rename

    def written_at_the_swap(src, dst):  # the user's write lands just after the check, before the rename
        if Path(src) == out:
            (out / "sub").mkdir()
            (out / "sub" / "late.txt").write_text("late")
        real_rename(src, dst)

    monkeypatch.setattr(O.os, "rename", written_at_the_swap)
    assert report_main([str(two_widths), "--out", str(out), "--resamples", "100"]) == 0
    assert (out / "sub" / "late.txt").read_text() == "late"
    assert "sub/late.txt" not in json.loads((out / MANIFEST).read_text())["files"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []


def test_table_tex_holds_only_what_pdflatex_reads(tmp_path: Path) -> None:
    import shutil
    import subprocess

    import pandas as pd

    from gear_repro.reporting.tables import write_tables

    cell = {"block": "Table 2", "dataset": "2Wiki", "ci_low": 50.0, "ci_high": 60.0, "n": 300, "n_questions": 300,
            "subset": None, "paper_other_setting": None, "n_errors": 0}
    long = pd.DataFrame([
        {**cell, "method": "T²RAG", "label": "T²RAG", "metric": "R@5", "ours": 55.0, "paper": 61.9, "delta": -6.9,
         "recall_ceiling": 87.3},
        {**cell, "method": "BM25", "label": "BM25 (Müller’s γ)", "metric": "R@2", "ours": 51.0, "paper": None,
         "delta": None, "recall_ceiling": 100.0, "paper_other_setting": 51.8},
    ])
    tex = write_tables(long, tmp_path)["tex"].read_text(encoding="utf-8")
    assert r"55.0 [50.0, 60.0] n=300 $\leq$87.3 (61.9, -6.9)" in tex  # the recall ceiling
    assert r"T$^{2}$RAG" in tex and r"BM25 (Müller's $\gamma$)" in tex and " -- " in tex  # the empty cell's dash
    assert r"\{paper, other setting: 51.8\}" in tex
    assert not [ch for ch in tex if not (ch.isascii() or "\u00c0" <= ch <= "\u00ff")]  # pdflatex's utf8 input
    if shutil.which("pdflatex"):
        doc = tmp_path / "doc.tex"
        doc.write_text("\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage{booktabs}\\usepackage{multirow}"
                       f"\\begin{{document}}\n{tex}\n\\end{{document}}\n", encoding="utf-8")
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:]
