"""Run dirs and outputs: a refused run keeps the existing run's .hydra copies, an empty or torn .lock is
taken over, and a full disk, a read-only run dir or report --out and a GEAR_CACHE that is a file each give one line
naming the path (no traceback, no per-question errors)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from gear_repro.pipeline.runner import Runner
from gear_repro.utils.lock import LOCK_FILE
from tests.helpers.cli import run_cli, toy_args

READ_ONLY = Path("/sys/kernel")  # an existing folder no process may write into (sysfs), root included


def _read_only() -> Path:
    try:
        fd, probe = tempfile.mkstemp(dir=READ_ONLY)
    except OSError:
        return READ_ONLY
    os.close(fd)
    os.unlink(probe)
    pytest.skip(f"{READ_ONLY} is writable on this machine")


def _one_line_error(r, *needles: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert lines and all(n in lines[-1] for n in needles), r.stderr


def test_refused_run_keeps_the_existing_runs_hydra_copies(toy_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert run_cli(toy_args(toy_dir, f"hydra.run.dir={run}"), tmp_path).returncode == 0
    before = {p: (run / ".hydra" / p).read_bytes() for p in ("config.yaml", "overrides.yaml", "hydra.yaml")}
    assert b"retriever=bm25" in before["overrides.yaml"]
    r = run_cli(toy_args(toy_dir, "retriever=sbert", f"hydra.run.dir={run}"), tmp_path)
    _one_line_error(r, "holds predictions of a different config")
    assert {p: (run / ".hydra" / p).read_bytes() for p in before} == before


@pytest.mark.parametrize("content", ["", '{"host": "h', "[]"])
def test_empty_or_torn_lock_is_taken_over(compose, toy_dir: Path, tmp_path: Path, content: str, caplog) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text(content)
    m = Runner(compose(toy_args(toy_dir)), run).run()
    assert m["n_questions"] == 3 and not (run / LOCK_FILE).exists()
    assert "taking over an empty or torn lock" in caplog.text


def test_disk_full_is_one_line_naming_the_file(toy_dir: Path, tmp_path: Path) -> None:
    code = ("import errno, os, sys\n"
            "def full(fd): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
            "os.fsync = full\n"
            "from gear_repro.cli.run import main\nsys.argv[0] = 'gear-repro'\nmain()\n")
    run = tmp_path / "run"
    r = run_cli(toy_args(toy_dir, f"hydra.run.dir={run}"), tmp_path, code=code)
    _one_line_error(r, f"error: cannot write {run}/", "No space left on device")


def test_read_only_run_dir_and_report_out(toy_dir: Path, tmp_path: Path) -> None:
    ro = _read_only()
    r = run_cli(toy_args(toy_dir, f"hydra.run.dir={ro}"), tmp_path)
    _one_line_error(r, f"error: hydra.run.dir {ro}: cannot write there")
    run = tmp_path / "run"
    assert run_cli(toy_args(toy_dir, f"hydra.run.dir={run}"), tmp_path).returncode == 0
    code = "from gear_repro.cli.report import main; import sys; sys.exit(main())"
    r = run_cli([str(run), "--out", str(ro / "report")], tmp_path, code=code)
    _one_line_error(r, f"error: --out {ro / 'report'}: cannot write there")


def test_gear_cache_that_is_a_file(toy_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache_file"
    cache.write_text("x")
    run = tmp_path / "run"
    r = run_cli(toy_args(toy_dir, f"hydra.run.dir={run}"), tmp_path, env={"GEAR_CACHE": str(cache)})
    _one_line_error(r, f"error: GEAR_CACHE={cache} is a file, not a folder")
    assert not (run / "predictions.jsonl").exists()


@pytest.mark.parametrize("value", ["~/gear cache", ""])
def test_gear_cache_with_a_tilde_or_empty_is_not_a_folder_in_the_working_dir(value: str, tmp_path: Path,
                                                                               monkeypatch) -> None:
    """GEAR_CACHE="~/x" (quoted, or from a .env file: no shell expansion) made a folder named "~" in the working dir
    and an empty GEAR_CACHE cached into the working dir itself: a cache that moves with the directory a command is
    started from. Now ~ is the home folder and empty the default."""
    from gear_repro.utils.paths import cache_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEAR_CACHE", value)
    monkeypatch.chdir(tmp_path)
    want = tmp_path / "home" / ("gear cache" if value else ".cache/gear_repro")
    assert cache_dir() == want and want.is_dir() and not (tmp_path / "~").exists()


def test_a_disk_that_fills_during_the_corpus_encode_stops_the_run_at_the_first_question(
        toy_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """With the capacity check off, a disk that filled while the corpus encode was saved failed the question and
    the next one encoded the corpus again: 9 encodes of ~20 s, 9 failed questions, and the error the run stopped
    with named failure.json (the disk still full). The run now stops at the first failed write, with its error."""
    import errno
    import json

    import numpy as np

    from gear_repro.utils.errors import OutputError
    from tests.helpers.doubles import HashEmbedder, ScriptedLLM
    from tests.helpers.runs import run_with_doubles

    cache, run = tmp_path / "cache", tmp_path / "run"
    monkeypatch.setenv("GEAR_CACHE", str(cache))
    full = {"now": False, "stays": True}
    real_fsync = os.fsync

    def save_on_a_full_disk(*a, **k):
        full["now"] = full["stays"]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fsync(fd):  # every later write fails too (failure.json included)
        if full["now"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(np, "save", save_on_a_full_disk)
    monkeypatch.setattr(os, "fsync", fsync)
    embedder = HashEmbedder()
    overrides = toy_args(toy_dir, "retriever=sbert", "run.capacity_check=false")
    with pytest.raises(OutputError, match=rf"^cannot write {cache}/embeddings/[\w-]+\.npy: No space left on "
                                          "device$"):
        run_with_doubles(overrides, run, llm=ScriptedLLM(), embedder=embedder)
    assert embedder.stats["encoded"] == 6 + 1  # the 6 passages once (not once per question), the first query
    assert (run / "predictions.jsonl").read_text() == ""
    assert not (run / "failure.json").exists()

    full.update(now=False, stays=False)  # only the encode's file fails: failure.json records it
    with pytest.raises(OutputError, match=r"embeddings/[\w-]+\.npy: No space left"):
        run_with_doubles(overrides, tmp_path / "run2", llm=ScriptedLLM(), embedder=HashEmbedder())
    error = json.loads((tmp_path / "run2" / "failure.json").read_text())["error"]
    assert error.startswith(f"OutputError: cannot write {cache}/embeddings/") and error.endswith(
        ".npy: No space left on device")
