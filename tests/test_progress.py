"""`run.progress=false` silences every bar of a run, the embedder's "Loading weights" and "Batches" too."""

from __future__ import annotations

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
