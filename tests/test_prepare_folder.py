"""gear-repro-prepare's folder as a whole: a killed prepare never leaves a new corpus beside old questions that loads
silently, and options that would be ignored are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gear_repro.cli.prepare import main as prepare_main
from gear_repro.data.dataset import load_dataset
from gear_repro.utils.errors import DataError


def _ircot(prefix: str) -> list[dict]:
    """Two IRCoT-format questions whose passage titles (= ids) start with ``prefix``."""
    return [{"question_id": f"{prefix}q{i}", "question_text": f"Where is {prefix} thing {i}?",
             "answers_objects": [{"spans": [f"{prefix} answer {i}"]}],
             "contexts": [{"idx": 0, "title": f"{prefix} page {i}", "paragraph_text": f"{prefix} thing {i} is here.",
                           "is_supporting": True},
                          {"idx": 1, "title": f"{prefix} noise {i}", "paragraph_text": "Unrelated text.",
                           "is_supporting": False}]} for i in range(2)]


def _prepare(tmp_path: Path, prefix: str, out: Path, *extra: str) -> int:
    qfile = tmp_path / f"{prefix}.jsonl"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in _ircot(prefix)), encoding="utf-8")
    return prepare_main(["--format", "ircot", "--questions", str(qfile), "--out", str(out), "--dataset", "musique",
                         *extra])


class Killed(BaseException):
    """What a SIGKILL looks like to the code after it: nothing more runs (BaseException: no handler catches it)."""


def test_a_killed_prepare_never_pairs_a_new_corpus_with_old_questions(tmp_path: Path, monkeypatch) -> None:
    """A prepare killed after writing the new corpus.jsonl left it beside the old questions.jsonl (and the old
    prepare_stats.json): the folder loaded silently and BM25 gave R@5 = 0.0. Files are now written into a staging
    folder and moved into place, prepare_stats.json (with each file's hash) last, and the loader refuses a folder
    whose corpus or questions are not the files recorded."""
    import gear_repro.cli.prepare as P

    out = tmp_path / "ds"
    assert _prepare(tmp_path, "old", out) == 0
    old = load_dataset(out)
    assert [q.id for q in old.questions] == ["oldq0", "oldq1"]

    real_save = P.save_questions

    def killed_while_writing(*a, **k):  # killed after the corpus was written, before the questions
        raise Killed

    monkeypatch.setattr(P, "save_questions", killed_while_writing)
    with pytest.raises(Killed):
        _prepare(tmp_path, "new", out)
    after = load_dataset(out)  # the old folder, whole
    assert after.hashes == old.hashes and [p.id for p in after.passages] == [p.id for p in old.passages]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no staging folder left

    import os

    moved: list[str] = []
    real_replace = os.replace

    def killed_between_moves(src, dst):  # killed after the first file was moved into place
        if Path(dst).parent == out:
            if moved:
                raise Killed
            moved.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(P, "save_questions", real_save)
    monkeypatch.setattr(os, "replace", killed_between_moves)
    with pytest.raises(Killed):
        _prepare(tmp_path, "new", out)
    monkeypatch.setattr(os, "replace", real_replace)
    assert moved == ["questions.jsonl"]
    with pytest.raises(DataError, match=r"questions\.jsonl is not the file gear-repro-prepare wrote with "
                                         r"prepare_stats\.json .*a prepare killed before it finished"):
        load_dataset(out)
    killed = out / f".prepare-tmp-{2**22 + 17}-abc"  # what a SIGKILL'ed prepare leaves (no finally ran)
    killed.mkdir()
    (killed / "corpus.jsonl").write_text("half")
    assert _prepare(tmp_path, "new", out) == 0  # re-running it repairs the folder and removes the leftover
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert [q.id for q in load_dataset(out).questions] == ["newq0", "newq1"]
    stats = json.loads((out / "prepare_stats.json").read_text())
    assert sorted(stats["files_sha256_16"]) == ["corpus.jsonl", "questions.jsonl"]
    # a hand edit is caught too; a folder without the record (hand-made, older prepare) is not checked
    with (out / "questions.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "extra", "question": "?", "answers": ["a"], "gold_ids": ["new page 0"]}) + "\n")
    with pytest.raises(DataError, match=r"or an edited file"):
        load_dataset(out)
    del stats["files_sha256_16"]
    (out / "prepare_stats.json").write_text(json.dumps(stats))
    assert len(load_dataset(out).questions) == 3


def test_chunk_overlap_without_chunk_size_is_refused(tmp_path: Path, capsys) -> None:
    """``--chunk-overlap 20`` without ``--chunk-size`` was ignored silently (whole documents, exit 0)."""
    assert _prepare(tmp_path, "x", tmp_path / "ds", "--chunk-overlap", "20") == 2
    assert "--chunk-overlap 20 needs --chunk-size" in capsys.readouterr().err
    assert not (tmp_path / "ds" / "corpus.jsonl").exists()
