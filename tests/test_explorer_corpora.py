"""The explorer's passages are each run's own (docs/explorer.md, "Corpora"): runs of one dataset column on different
corpora keep their own gold ids, titles and ranks, with a note on the page; a corpus is read where the run read it
(a relative ``dataset.path`` against the run's cwd) and its texts are shown only while its hash is the run's.

Runs: BM25 through the real runner (tests/helpers/runs.py) on the toy corpus (tests/conftest.py) and on the same
passages under rotated ids with the questions' gold remapped (as a re-prepare with another id scheme does).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gear_repro.evaluation.per_question import question_values
from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS, TOY_TRIPLES, write_jsonl
from tests.helpers.doubles import HashEmbedder, ScriptedLLM
from tests.helpers.runs import run_with_doubles
from tests.test_explorer import chromium, load_js, question_file, summary  # noqa: F401  (chromium: a fixture)


def make_toy(dest: Path, shift: int = 0) -> Path:
    """The toy dataset with passage ids shifted by ``shift`` (mod 6) and the gold ids with them."""
    new = {str(i): str((i + shift) % len(TOY_PASSAGES)) for i in range(len(TOY_PASSAGES))}
    dest.mkdir(parents=True)
    write_jsonl(dest / "corpus.jsonl", sorted(({"id": new[str(i)], "title": t, "text": x} for i, (t, x) in
                                               enumerate(TOY_PASSAGES)), key=lambda p: int(p["id"])))
    write_jsonl(dest / "questions.jsonl", [{**q, "gold_ids": [new[g] for g in q["gold_ids"]]} for q in TOY_QUESTIONS])
    write_jsonl(dest / "triples.jsonl", [{"id": f"{new[p]}-{i}", "subject": s, "predicate": r, "object": o,
                                          "passage_id": new[p]} for i, (s, r, o, p) in enumerate(TOY_TRIPLES)])
    return dest


def bm25_run(data: str | Path, run_dir: Path) -> Path:
    run_with_doubles(["retriever=bm25", "embedder=minilm", "dataset.name=musique", "run.progress=false",
                      f"dataset.path={data}"], run_dir, llm=ScriptedLLM(), embedder=HashEmbedder())
    return run_dir


def explorer(runs: list[Path], out: Path) -> Path:
    from gear_repro.cli.report import main

    assert main([*map(str, runs), "--out", str(out), "--html", "--resamples", "100"]) == 0
    return out


def records(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return {str(p["id"]): p for p in map(json.loads, filter(None, lines))}


def titles(data: Path) -> dict[str, str]:
    return {p["id"]: p["title"] for p in map(json.loads, (data / "corpus.jsonl").read_text().splitlines())}


def shown_passages(detail: dict, ds: dict, j: int) -> dict:
    """The passages dict method ``j`` of the question view reads (one per corpus when the column has several)."""
    p = detail["passages"]
    return p[ds["methods"][j].get("corpus", 0)] if isinstance(p, list) else p


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[Path]]:
    root = tmp_path_factory.mktemp("mixed")
    data = [make_toy(root / "toy"), make_toy(root / "toy_rot", shift=1)]
    runs = [bm25_run(d, root / "runs" / d.name) for d in data]
    return explorer(runs, root / "report"), runs, data


def test_each_method_has_its_own_gold_and_passages(mixed) -> None:
    """Two runs under MuSiQue on the toy corpus and on it with rotated ids: every method's gold ids, their titles
    in the corpus it read, its gold ranks (question view) and its R@k (question list) are its own run's."""
    report, runs, data = mixed
    ds = summary(report)["datasets"][0]
    assert len(ds["methods"]) == 2 and [m["corpus"] for m in ds["methods"]] == [0, 1]
    for j, (run, d) in enumerate(zip(runs, data, strict=True)):
        recs, own_titles = records(run), titles(d)
        for k in (1, 2, 5):
            want = question_values(list(recs.values()), f"recall@{k}")
            for row in ds["questions"]:
                c = row["m"][j]
                got = 100 * sum(0 < r <= k for r in c["g"].get(str(k), c["g"]["final"])) / c.get("ng", row["ng"])
                assert got == pytest.approx(want[row["id"]]), (j, k, row["id"])
        for n, row in enumerate(ds["questions"]):
            rec, detail = recs[row["id"]], question_file(report, f"d0/{n}")
            m = detail["methods"][j]
            gold = m.get("gold", detail["gold"])  # app.js goldOf
            assert gold == rec["gold_ids"]
            final = rec["rankings"]["final"]
            assert m["gold_rank"] == {g: final.index(g) + 1 if g in final else 0 for g in gold}
            passages = shown_passages(detail, ds, j)
            for pid in [*gold, *m["rankings"]["final"]]:
                assert passages[pid][0] == own_titles[pid], (j, pid)
    # the same passage under both id schemes: rank 1 for both runs on q2 ("capital of Germany" -> Berlin)
    q2 = next(n for n, row in enumerate(ds["questions"]) if row["id"] == "q2")
    detail = question_file(report, f"d0/{q2}")
    assert [shown_passages(detail, ds, j)[g][0] for j in (0, 1) for g in detail["methods"][j].get("gold", detail["gold"])] \
        == ["Berlin", "Berlin"]


def test_mixed_corpora_are_noted_on_the_question_view(mixed, tmp_path: Path) -> None:
    """The corpus split is in data.js for the question view (app.js ``#q-data-notes``); the two corpora hold the same
    passages and questions by content (ids shifted), so the runs are the same data, paired (no "tabled under ... but
    run on different ... files" note, no refused pair); runs on one corpus (by hash, here a copy at another path)
    keep the page's data as before: no corpus fields, one passages dict."""
    report, runs, data = mixed
    ds = summary(report)["datasets"][0]
    notes = "\n".join(ds["data_notes"])
    assert "tabled under" not in notes and "unpaired" not in ds
    assert "2 different corpora" in notes
    assert [c["path"] for c in ds["corpora"]] == [str(d / "corpus.jsonl") for d in data]
    assert all(c["note"] is None for c in ds["corpora"])
    app = (report / "explorer" / "app.js").read_text(encoding="utf-8")
    assert "q-data-notes" in app and "goldOf(" in app

    copy = bm25_run(shutil.copytree(data[0], tmp_path / "copy"), tmp_path / "runs" / "copy")
    one = explorer([runs[0], copy], tmp_path / "report")
    ds = summary(one)["datasets"][0]
    assert len(ds["methods"]) == 2 and "corpora" not in ds and "data_notes" not in ds
    assert all("corpus" not in m for m in ds["methods"])
    detail = question_file(one, "d0/0")
    assert isinstance(detail["passages"], dict) and all("gold" not in m for m in detail["methods"])
    assert [detail["passages"][g][0] for g in detail["gold"]] == ["France", "Emmanuel Macron"]


@pytest.mark.parametrize("change", ["edited", "missing"])
def test_changed_or_missing_corpus_shows_ids_only(tmp_path: Path, change: str) -> None:
    """A corpus edited after the run (its hash is not run.json ``data_hashes.corpus``) or gone: no texts, a note."""
    data = make_toy(tmp_path / "toy")
    run = bm25_run(data, tmp_path / "runs" / "a")
    corpus = data / "corpus.jsonl"
    if change == "edited":
        corpus.write_text(corpus.read_text().replace('"France"', '"EDITED AFTER THE RUN"'))
    else:
        shutil.rmtree(data)
    report = explorer([run], tmp_path / "report")
    ds = summary(report)["datasets"][0]
    want = (f"corpus changed since the run ({corpus} has hash" if change == "edited" else
            f"corpus not found at {corpus}")
    assert want in ds["corpora"][0]["note"] and "passage texts unavailable" in ds["corpora"][0]["note"]
    assert any(want in n for n in ds["data_notes"])
    for f in sorted((report / "explorer" / "q").rglob("*.js")):
        detail = load_js(f, "window.EXPLORER_QUESTION(")
        assert detail["passages"] == {} and detail["gold"]  # ids only
    assert "EDITED" not in "".join(f.read_text() for f in (report / "explorer" / "q").rglob("*.js"))


def test_relative_dataset_path_is_read_against_the_runs_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dataset.path=toy`` started in ``work/``: the report, run from elsewhere, reads work/toy (run.json ``cwd``;
    a run without it: ``.hydra/hydra.yaml`` ``hydra.runtime.cwd``)."""
    work = tmp_path / "work"
    make_toy(work / "toy")
    monkeypatch.chdir(work)
    run = bm25_run("toy", tmp_path / "runs" / "rel")
    assert Path(json.loads((run / "run.json").read_text())["cwd"]).resolve() == work.resolve()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for source in ("run.json", "hydra.yaml"):
        if source == "hydra.yaml":
            info = json.loads((run / "run.json").read_text())
            del info["cwd"]
            (run / "run.json").write_text(json.dumps(info))
            (run / ".hydra").mkdir()
            (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  runtime:\n    cwd: {work}\n")
        report = explorer([run], tmp_path / f"report_{source}")
        assert "corpora" not in summary(report)["datasets"][0]
        detail = question_file(report, "d0/0")
        assert [detail["passages"][g][0] for g in detail["gold"]] == ["France", "Emmanuel Macron"], source


@pytest.mark.browser
def test_mixed_corpora_in_chromium(mixed, chromium) -> None:  # noqa: F811  (the fixture)
    """The page shows each run's own gold ranks and gold marks, and the note (q1: France and Macron, ids 2, 3 in the
    toy corpus and 3, 4 in the rotated one)."""
    from tests.helpers.browser import wait_for

    report, runs, _ = mixed
    ds = summary(report)["datasets"][0]
    i = next(n for n, row in enumerate(ds["questions"]) if row["id"] == "q1")
    chromium.get((report / "index.html").as_uri() + f"#q?ds=0&i={i}&a=0&b=1&k=5")
    wait_for(chromium, f"return document.getElementById('view-q').dataset.loaded === 'd0/{i}'")
    rows = chromium.execute_script("""return [...document.querySelectorAll('#gold-ranks tbody tr')].map(tr =>
        [tr.querySelector('.ptitle').textContent, ...[...tr.querySelectorAll('td.num')].map(td => td.textContent)])""")
    want = []
    for j, run in enumerate(runs):
        final = records(run)["q1"]["rankings"]["final"]
        for g, title in zip(records(run)["q1"]["gold_ids"], ("France", "Emmanuel Macron"), strict=True):
            rank = str(final.index(g) + 1) if g in final else f"> {len(final)}"
            want.append([title, *(rank if jj == j else "n/a" for jj in (0, 1))])
    assert rows == want
    for side, run in (("a", runs[0]), ("b", runs[1])):
        rec = records(run)["q1"]
        items = chromium.execute_script(f"return [...document.querySelectorAll('#panel-{side} ol.topk > li')].map(li => [li.dataset.pid, li.classList.contains('gold')])")
        assert items == [[pid, pid in rec["gold_ids"]] for pid in rec["rankings"]["final"][:5]]
    assert "2 different corpora" in chromium.find_element("css selector", "#q-data-notes").text


@pytest.mark.parametrize("damage", ["not JSON", "not UTF-8", "no id", "unreadable"])
def test_an_unreadable_corpus_is_a_note_and_a_bug_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         damage: str) -> None:
    """A corpus the explorer cannot read (I/O, not UTF-8, not JSON Lines, a passage without an id) shows ids only
    with a note naming the error, never a failed report; an error of the code itself is not hidden as one."""
    import gear_repro.reporting.html.data as D
    from gear_repro.reporting.runs import RunResult

    corpus = tmp_path / "toy" / "corpus.jsonl"
    corpus.parent.mkdir()
    corpus.write_bytes({"not JSON": b'{"id": "0", "title": "A"\n', "not UTF-8": b'{"id": "0", "title": "\xff"}\n',
                        "no id": b'{"title": "A", "text": "a"}\n'}.get(damage, b'{"id": "0", "title": "A"}\n'))
    if damage == "unreadable":
        def denied(path: Path) -> str:
            raise PermissionError(13, "Permission denied", str(path))
        monkeypatch.setattr(D, "hash_file", denied)
    run = RunResult(tmp_path / "run", {"dataset": {"path": str(corpus.parent)}}, {})
    shown = D.Corpora().of(run)
    error = {"not JSON": "DataError", "not UTF-8": "DataError", "no id": "KeyError", "unreadable": "PermissionError"}
    assert shown.texts == {} and shown.path == str(corpus)
    assert shown.note.startswith(f"passage texts unavailable: {corpus} could not be read ({error[damage]}: ")

    def bug(path: Path) -> str:
        raise TypeError("a bug in the explorer")
    monkeypatch.setattr(D, "hash_file", bug)
    with pytest.raises(TypeError, match="a bug"):
        D.Corpora().of(run)
