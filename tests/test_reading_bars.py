"""Large datasets show bars (rate, ETA) while they are read, matched, checked and written: at MuSiQue's full size
loading the triples file (214 MB, 1.5M lines) and gear-repro-prepare take tens of seconds each (docs/scale.md)."""

from __future__ import annotations

import json
from pathlib import Path

import gear_repro.utils.io as io
from gear_repro.data import load_dataset


def test_a_large_file_is_read_under_a_bar_and_the_records_do_not_change(toy_dir: Path, capsys, monkeypatch) -> None:
    quiet = load_dataset(toy_dir, progress=True)  # the toy's files are far below the threshold: no bar
    assert "reading" not in capsys.readouterr().err
    monkeypatch.setattr(io, "BAR_MIN_BYTES", 0)  # every file counts as large
    shown = load_dataset(toy_dir, progress=True)
    err = capsys.readouterr().err
    assert "reading corpus.jsonl: 100%" in err and "B/s" in err
    assert "reading triples.jsonl: 100%" in err
    assert shown.passages == quiet.passages and shown.triples == quiet.triples and shown.questions == quiet.questions
    load_dataset(toy_dir)  # progress off (the default): no bar whatever the size
    assert "reading" not in capsys.readouterr().err


def test_prepare_shows_its_bars_and_no_progress_hides_them(tmp_path: Path, capsys, monkeypatch) -> None:
    from gear_repro.cli.prepare import main as prepare_main

    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "2hop__1_2", "question": "Where?", "answer": "Amiens", "answer_aliases": [],
                             "paragraphs": [{"idx": i, "title": f"T{i}", "paragraph_text": f"text {i}",
                                             "is_supporting": i == 0} for i in range(3)]}) + "\n")
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps({"docs": [{"title": f"T{i}", "text": f"text {i}",
                                            "extracted_triples": [[f"T{i}", "is in", "Amiens"]]} for i in range(3)]}))
    args = ["--format", "musique", "--questions", str(q), "--triples-hipporag", str(openie)]
    monkeypatch.setattr(io, "BAR_MIN_BYTES", 0)
    monkeypatch.setattr(io, "BAR_MIN_RECORDS", 0)
    assert prepare_main([*args, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    for bar in ("reading openie.json: 100%", "matching openie.json docs: 100%", "checking records: 100%",
                "writing corpus.jsonl: 100%", "writing triples.jsonl: 100%"):
        assert bar in err, bar
    assert prepare_main([*args, "--no-progress", "--out", str(tmp_path / "b")]) == 0
    assert "100%" not in capsys.readouterr().err
    assert (tmp_path / "a" / "triples.jsonl").read_bytes() == (tmp_path / "b" / "triples.jsonl").read_bytes()
