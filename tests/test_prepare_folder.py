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


def _prepare(tmp_path: Path, prefix: str, out: Path, *extra: str, triples: bool = False) -> int:
    """Prepare ``_ircot(prefix)`` into ``out``; ``triples``: with an OpenIE file of one triple per passage."""
    qfile = tmp_path / f"{prefix}.jsonl"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in _ircot(prefix)), encoding="utf-8")
    if triples:
        docs = [{"title": c["title"], "text": c["paragraph_text"],
                 "extracted_triples": [[c["title"], "is about", f"{prefix} topic"]]}
                for r in _ircot(prefix) for c in r["contexts"]]
        openie = tmp_path / f"{prefix}_openie.json"
        openie.write_text(json.dumps({"docs": docs}), encoding="utf-8")
        extra = (*extra, "--triples-hipporag", str(openie))
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
    assert moved == ["prepare_stats.json"]
    with pytest.raises(DataError, match=r"corpus\.jsonl is not the file gear-repro-prepare wrote with "
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


def test_another_data_sets_triples_beside_a_prepared_corpus_are_refused(tmp_path: Path, monkeypatch) -> None:
    """The loader compared only corpus and questions with prepare_stats.json: another data set's triples.jsonl left
    beside a corpus (a killed or concurrent re-prepare; the union corpora share the ids "0", "1", ...) loaded
    silently, and NaiveGE lost 17-23 recall points with exit 0. Every file prepare recorded is now checked, a
    recorded one that is missing too; triples the record does not name (a stage=extract's) still load."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert _prepare(tmp_path, "aa", a, triples=True) == 0 and _prepare(tmp_path, "bb", b, triples=True) == 0
    assert [t.subject for t in load_dataset(a).triples][:1] == ["aa page 0"]
    assert [p.id for p in load_dataset(a).passages] == [p.id for p in load_dataset(b).passages]  # "0".."3"
    (a / "triples.jsonl").write_bytes((b / "triples.jsonl").read_bytes())
    with pytest.raises(DataError, match=rf"{a / 'triples.jsonl'} is not the file gear-repro-prepare wrote with "
                                        r"prepare_stats\.json .*two prepares into this folder"):
        load_dataset(a)
    load_dataset(a, triples_file=None)  # a run without triples does not read them

    import gear_repro.cli.prepare as P

    real_replace = P.os.replace

    def killed(src, dst):  # killed before its first move into the folder, after removing the old triples
        if Path(dst).parent == a:
            raise Killed
        real_replace(src, dst)

    assert _prepare(tmp_path, "aa", a, triples=True) == 0
    monkeypatch.setattr(P.os, "replace", killed)
    with pytest.raises(Killed):
        _prepare(tmp_path, "cc", a)  # a prepare without triples removes the old ones
    monkeypatch.undo()
    assert not (a / "triples.jsonl").exists()
    with pytest.raises(DataError, match=rf"{a / 'triples.jsonl'} is missing, but gear-repro-prepare wrote it"):
        load_dataset(a)
    assert _prepare(tmp_path, "cc", a) == 0
    (a / "triples.jsonl").write_bytes((b / "triples.jsonl").read_bytes())  # a stage=extract's, copied in
    assert len(load_dataset(a).triples) == 4


def test_two_prepares_into_one_folder_do_not_interleave(tmp_path: Path, capsys) -> None:
    """Two prepares into one folder 0.7 s apart both exited 0 and left a folder mixing their files. A prepare
    holds an exclusive lock of the folder from start to end; a second one is refused, naming the holder."""
    import fcntl
    import os

    out = tmp_path / "ds"
    assert _prepare(tmp_path, "old", out) == 0
    assert sorted(p.name for p in out.iterdir()) == ["corpus.jsonl", "prepare_stats.json", "questions.jsonl"]
    fd = os.open(out / ".prepare.lock", os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"4242")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running prepare holds
        assert _prepare(tmp_path, "new", out) == 2
        assert (f"--out {out} is being written by another gear-repro-prepare (process 4242"
                in capsys.readouterr().err)
        assert [q.id for q in load_dataset(out).questions] == ["oldq0", "oldq1"]
    finally:
        os.close(fd)  # the holder ends (a killed one too: the kernel releases its lock)
    assert _prepare(tmp_path, "new", out) == 0
    assert [q.id for q in load_dataset(out).questions] == ["newq0", "newq1"]
    fresh = tmp_path / "fresh"
    assert _prepare(tmp_path, "x", fresh, "--limit", "0") == 2  # refused before the folder is made
    assert not fresh.exists()
