"""Progress bars: `run.progress=false` silences every bar of a run (the embedder's "Loading weights" and "Batches" too); the
per-question bar's ETA leaves out the first question's set-up."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli, toy_args


def test_embedder_progress_follows_run_progress(compose) -> None:
    assert compose(["run.progress=false"]).embedder.show_progress is False
    assert compose(["embedder=minilm"]).embedder.show_progress is True
    assert compose(["run.progress=false", "embedder.show_progress=true"]).embedder.show_progress is True


@pytest.mark.slow
def test_no_embedder_bars_without_progress(toy_dir: Path, tmp_path: Path) -> None:
    r = run_cli(toy_args(toy_dir, "retriever=sbert", "embedder=minilm", "embedder.cache=false",
                         f"hydra.run.dir={tmp_path / 'run'}"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Loading weights" not in r.stderr and "Batches" not in r.stderr, r.stderr[-2000:]


def test_the_question_bar_gives_no_eta_from_the_first_question_alone() -> None:
    from gear_repro.pipeline.runner import QuestionBar

    now = [0.0]
    with QuestionBar(100, "toy", clock=lambda: now[0], file=io.StringIO()) as bar:
        assert str(bar.bar).endswith("0/100 [00:00, eta ?]")
        now[0] = 1335.0  # the first question also loaded the embedder and encoded the corpus
        bar.done()
        assert str(bar.bar).endswith("1/100 [00:00, eta ?]")  # not 99 x 1335 s = 36:42:45
        now[0] += 12.0
        bar.done()
        assert str(bar.bar).endswith("2/100 [00:00, 12.0 s/q, eta 19:36]")  # 98 x 12 s
        now[0] += 18.0
        bar.done()
        assert str(bar.bar).endswith("3/100 [00:00, 15.0 s/q, eta 24:15]")
    with QuestionBar(3, "toy", clock=lambda: now[0], disable=True) as quiet:  # run.progress=false
        for _ in range(3):
            quiet.done()
        assert quiet.finished == 3


def test_the_runner_shows_the_question_bar(compose, toy_dir: Path, tmp_path: Path, capsys) -> None:
    from gear_repro.pipeline.runner import Runner

    cfg = compose([f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=true"])
    Runner(cfg, tmp_path / "run").run()
    err = capsys.readouterr().err
    assert re.search(r"toy .*\| 3/3 \[\d\d:\d\d, [\d.]+ s/q, eta 00:00\]", err), err[-1000:]
