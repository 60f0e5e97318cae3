"""The Python API (gear_repro.api): compose, Pipeline.retrieve/answer/evaluate, data from memory, load_runs/compare,
a user's own components found by their base class, and the CLI and the API writing the same predictions."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import gear_repro
from gear_repro.api import BaseMethod, BaseRetriever
from gear_repro.methods.base import MethodOutput
from gear_repro.types import Question, Ranking
from gear_repro.utils.errors import ConfigError, DataError, GearError
from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS, TOY_TRIPLES
from tests.helpers.cli import run_cli, toy_args
from tests.helpers.doubles import HashEmbedder, ScriptedLLM

PASSAGES = [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(TOY_PASSAGES)]
TRIPLES = [{"id": f"{p}-{i}", "subject": s, "predicate": r, "object": o, "passage_id": p}
           for i, (s, r, o, p) in enumerate(TOY_TRIPLES)]
BM25 = ("retriever=bm25", "dataset.name=toy", "run.progress=false")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))


# -- a user's own components: defined here, outside the package --------------------------------------------------
class TitleRetriever(BaseRetriever):
    """Ranks passages by the words their title shares with the query (a retriever of 'my package')."""

    name = "title"

    def __init__(self, passages: list, boost: float = 1.0, name: str = "title") -> None:
        self.passages = passages
        self.boost = boost

    def retrieve(self, query: str, k: int) -> Ranking:
        words = set(query.lower().replace("?", "").split())
        scored = sorted(((self.boost * len(words & set(p.title.lower().split())), -i, p.id)
                         for i, p in enumerate(self.passages)), reverse=True)[:k]
        return Ranking([pid for _, _, pid in scored], [float(s) for s, _, _ in scored])


class ReverseMethod(BaseMethod):
    """The base retriever's list reversed (a method of 'my package'); fails on a question containing 'fail'."""

    name = "reverse"

    def __init__(self, retriever, name: str = "reverse", output_depth: int | None = None,
                 save_depth: int | None = None) -> None:  # agent=single's keys, which this config node keeps
        self.retriever = retriever
        self.name = name

    def run(self, question: Question, k: int) -> MethodOutput:
        if "fail" in question.question:
            raise RuntimeError("this method cannot read that question")
        r = self.retriever.retrieve(question.question, len(PASSAGES))
        return MethodOutput(Ranking(r.ids[::-1][:k], r.scores[::-1][:k]), trace={"base": r.ids})


def test_compose_runs_the_cli_checks():
    cfg = gear_repro.compose("agent=gear", "retriever=bm25")
    assert cfg.agent._target_ == "gear_repro.methods.gear.agent.GearAgent" and cfg.retriever.name == "bm25"
    with pytest.raises(ConfigError, match=r"run.ks lists 5 more than once"):
        gear_repro.compose("run.ks=[5,5]")
    with pytest.raises(ConfigError, match=r"llm.api_key is not a setting"):
        gear_repro.compose("llm.api_key=sk-123")
    with pytest.raises(ConfigError, match=r"hipporag.damping|retriever"):
        gear_repro.compose("+retriever.no_such_setting=1")


def test_retrieve_a_question_without_gold_from_memory():
    pipe = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES)
    res = pipe.retrieve("Who is the president of France?", k=3)
    assert list(res.ranking.columns) == ["rank", "id", "title", "score", "passage"]
    assert res.ranking["id"].tolist()[0] == "2" and res.ranking["title"].tolist()[0] == "France"
    assert len(res.ranking) == 3 and res.ranking["score"].is_monotonic_decreasing
    assert res.ranking["passage"].tolist()[0] == TOY_PASSAGES[2][1]
    assert res.error is None and res.em is None and res.id.startswith("q-")


def test_compose_wraps_hydras_errors_naming_the_override():
    with pytest.raises(ConfigError, match=r"^compose: Error merging override dataset.limit=abc: Value 'abc' of type "
                                          r"'str' could not be converted to Integer$"):
        gear_repro.compose("dataset.limit=abc")
    with pytest.raises(ConfigError, match=r"^compose: no viable alternative at input '\[1' \(override "
                                          r"dataset.limit=\[1\)$"):
        gear_repro.compose("retriever=bm25", "dataset.limit=[1")
    with pytest.raises(ConfigError, match=r"Could not find 'retriever/nosuch'; Available options in 'retriever': "
                                          r"bm25, composed, "):
        gear_repro.compose("retriever=nosuch")


def test_a_component_class_that_is_no_subclass_of_its_base_is_named():
    with pytest.raises(ConfigError, match=r"^retriever._target_=tests.helpers.doubles.PlainRetriever: PlainRetriever "
                                          r"does not subclass gear_repro.BaseRetriever; a retriever of your own must"):
        gear_repro.compose("retriever=bm25", "retriever._target_=tests.helpers.doubles.PlainRetriever")
    with pytest.raises(ConfigError, match=r"^agent._target_=tests.helpers.doubles.PlainRetriever: PlainRetriever does "
                                          r"not subclass gear_repro.BaseMethod"):
        gear_repro.compose("agent._target_=tests.helpers.doubles.PlainRetriever")


def test_a_bad_component_path_is_one_line_before_the_data_loads(tmp_path: Path):
    run = tmp_path / "run"
    r = run_cli([f"dataset.path={tmp_path / 'no_such_data'}", "dataset.name=toy", "retriever=bm25",
                 "retriever._target_=nosuchpkg.retrievers.TitleRetriever", f"hydra.run.dir={run}"], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == (
        "error: retriever._target_=nosuchpkg.retrievers.TitleRetriever: no module named 'nosuchpkg' on the import "
        "path (a module of your own: run gear-repro from the folder that holds it, install it, or add its folder to "
        "PYTHONPATH)")
    r = run_cli([f"dataset.path={tmp_path / 'no_such_data'}", "dataset.name=toy", "retriever=bm25",
                 "retriever._target_=gear_repro.retrieval.base.BM25Retrieverr", f"hydra.run.dir={run}"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "error: retriever._target_=gear_repro.retrieval.base.BM25Retrieverr: gear_repro.retrieval.base has no "
        "'BM25Retrieverr'"), r.stderr[-3000:]


def test_retrieve_refuses_a_depth_below_one():
    pipe = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES)
    assert len(pipe.retrieve("Who is the president of France?", k=2).ranking) == 2
    for bad in (-3, 0, 2.5, True):  # -3 returned all but the last 3 passages; 0 the default depth
        with pytest.raises(ConfigError, match=rf"Pipeline.retrieve: k must be a whole number >= 1 .*got {bad!r}$"):
            pipe.retrieve("Who is the president of France?", k=bad)
    with pytest.raises(ConfigError, match=r"k must be a whole number >= 1 .*got -1"):
        Ranking(["a", "b", "c"], [3.0, 2.0, 1.0]).top(-1)
    with pytest.raises(ConfigError, match=r"k must be a whole number >= 1 .*got 0"):
        TitleRetriever([]).retrieve_many(["q"], 0)
    with pytest.raises(ConfigError, match=r"run.ks must be positive ranks, got \[-3, 5\]"):
        gear_repro.compose("run.ks=[-3,5]")


def test_memory_data_is_checked_naming_the_record():
    cfg = gear_repro.compose(*BM25)
    with pytest.raises(DataError, match=r"passages\[2\]: duplicate passage id '0' \(first at passages\[0\]\)"):
        gear_repro.Pipeline.from_config(cfg, passages=[*PASSAGES[:2], PASSAGES[0]])
    with pytest.raises(DataError, match=r"passages\[1\]: record lacks field 'text'"):
        gear_repro.Pipeline.from_config(cfg, passages=[PASSAGES[0], {"id": "x", "title": "X"}])
    bad = [*TRIPLES, {"id": "t9", "subject": "a", "predicate": "b", "object": "c", "passage_id": "99"}]
    with pytest.raises(DataError, match=r"triples: 1 triples point to passages not in the corpus \(first: triple "
                                        r"'t9', passage_id '99'\)"):
        gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, triples=bad)
    with pytest.raises(DataError, match=r"questions\[1\]: duplicate question id 'q1'"):
        gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=[TOY_QUESTIONS[0], TOY_QUESTIONS[0]])


def test_memory_data_hashes_as_the_same_folder(tmp_path: Path):
    from gear_repro.data import load_dataset, save_corpus, save_questions, save_triples
    from gear_repro.data.records import passages_from, questions_from, triples_from

    frame = pd.DataFrame(PASSAGES)  # a DataFrame is read row by row as a list of dicts
    pipe = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=frame, questions=TOY_QUESTIONS,
                                           triples=TRIPLES)
    folder = tmp_path / "same"
    folder.mkdir()
    save_corpus(folder / "corpus.jsonl", passages_from(PASSAGES))
    save_questions(folder / "questions.jsonl", questions_from(TOY_QUESTIONS))
    save_triples(folder / "triples.jsonl", triples_from(TRIPLES))
    assert pipe.resources.dataset.hashes == load_dataset(folder).hashes
    assert set(pipe.resources.dataset.hashes) == {"corpus", "questions", "triples"}
    assert Path(pipe.cfg.dataset.path).parent == tmp_path / "cache" / "datasets"


def test_gear_answer_shows_rounds_calls_and_answer():
    cfg = gear_repro.compose("agent=gear", "retriever=bm25", "expansion=none", "agent.gist_docs=base", "dataset.max_rounds=2", "qa=true",
                             "dataset.name=toy")
    llm = ScriptedLLM({("reason", 1): "Answerable: No\nWhy: missing.", "rewrite": "Next Question: Where is Amiens?",
                       ("reason", 2): "Answerable: Yes\nAnswer: Amiens", "qa": "Answer: Amiens",
                       "gist": 'Facts: ("Emmanuel Macron", "born in", "Amiens")'})
    pipe = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, triples=TRIPLES, llm=llm, embedder=HashEmbedder())
    res = pipe.answer({"question": "Where was the president of France born?", "answers": ["Amiens"]})
    assert res.answer == "Amiens" and res.em == 1.0 and res.error is None
    rounds = res.rounds_frame()
    assert rounds["round"].tolist() == [1, 2]
    assert rounds["next_query"].tolist()[0] == "Where is Amiens?"
    # the same gist triple read in both rounds stays twice in the memory (Eq. 5, the pseudocode's extend)
    assert rounds["memory"].tolist()[1] == [["Emmanuel Macron", "born in", "Amiens"]] * 2
    assert [c["stage"] for c in res.llm_calls] == ["gist", "reason", "rewrite", "gist", "reason", "qa"]
    assert res.tokens > 0 and res.timings["total_s"] > 0


def _predictions(run_dir: Path) -> list[dict]:
    """predictions.jsonl without the wall-clock fields (they differ between any two runs, CLI or not)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("timings", "total_s", "latency_s")}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return [strip(json.loads(line)) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def _seconds_zeroed(raw: bytes) -> bytes:
    return re.sub(rb'"(\w+_s)": [0-9.e-]+', rb'"\1": 0', raw)


def test_cli_and_api_write_the_same_predictions(tmp_path: Path, toy_dir: Path):
    args = toy_args(toy_dir)
    proc = run_cli([*args, f"hydra.run.dir={tmp_path / 'cli'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    pipe = gear_repro.Pipeline.from_config(gear_repro.compose(*args))
    ev = pipe.evaluate(run_dir=tmp_path / "api")
    cli_raw = (tmp_path / "cli" / "predictions.jsonl").read_bytes()
    api_raw = (tmp_path / "api" / "predictions.jsonl").read_bytes()
    assert _predictions(tmp_path / "cli") == _predictions(tmp_path / "api")
    assert _seconds_zeroed(cli_raw) == _seconds_zeroed(api_raw)  # byte for byte but the measured seconds
    assert (tmp_path / "cli" / "config.yaml").read_bytes() == (tmp_path / "api" / "config.yaml").read_bytes()
    cli_metrics = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    assert {k: cli_metrics[k] for k in ("recall@5", "fingerprint", "question_ids")} == \
        {k: ev.metrics[k] for k in ("recall@5", "fingerprint", "question_ids")}
    assert ev.questions["id"].tolist() == ["q1", "q2", "q3"]
    assert ev.questions["recall@5"].tolist() == [100.0, 100.0, 100.0]
    # the same run dir again: the runner's resume finds every question finished, nothing is re-run
    again = pipe.evaluate(run_dir=tmp_path / "api")
    assert again.metrics["fingerprint"] == ev.metrics["fingerprint"]
    assert (tmp_path / "api" / "predictions.jsonl").read_bytes() == api_raw


def test_user_components_by_target_through_runner_and_report(tmp_path: Path):
    """A retriever and a method of a package outside gear_repro, named by ``_target_``, run through the same
    pipeline, runner and report; a question the method fails on is recorded and counted."""
    cfg = gear_repro.compose(*BM25, "retriever._target_=tests.test_api.TitleRetriever", "+retriever.boost=2.0",
                             "agent._target_=tests.test_api.ReverseMethod", "agent.name=reverse")
    pipe = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS)
    assert isinstance(pipe.method, ReverseMethod) and isinstance(pipe.method.retriever, TitleRetriever)
    assert pipe.method.retriever.boost == 2.0
    hit = pipe.retrieve("Paris France", k=6)
    assert hit.ranking["id"].tolist()[-2:] == ["2", "0"]  # reversed: the best titles last
    questions = [*TOY_QUESTIONS, {"id": "q4", "question": "please fail here", "answers": ["x"], "gold_ids": ["0"]}]
    ev = pipe.evaluate(questions, run_dir=tmp_path / "mine")
    assert ev.metrics["n_errors"] == 1 and ev.metrics["method_class"] == "tests.test_api.ReverseMethod"
    row = ev.questions.set_index("id").loc["q4"]
    assert row["error"] == "RuntimeError: this method cannot read that question" and row["recall@5"] == 0.0
    from gear_repro.reporting.runs import find_runs
    from gear_repro.reporting.tables import long_table

    table = long_table(find_runs([tmp_path / "mine"]))
    assert not table.empty


def test_user_method_passed_as_object(tmp_path: Path):
    cfg = gear_repro.compose(*BM25)
    pipe = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS,
                                           retriever=TitleRetriever(gear_repro.Pipeline.from_config(
                                               cfg, passages=PASSAGES).resources.dataset.passages))
    assert isinstance(pipe.method.retriever, TitleRetriever)  # the config's SingleStep over my retriever
    assert pipe.retrieve("Berlin", k=1).ranking["id"].tolist() == ["1"]


def test_load_runs_and_compare(tmp_path: Path):
    cfg = gear_repro.compose(*BM25)
    a = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS).evaluate(run_dir=tmp_path / "a")
    cfg_b = gear_repro.compose(*BM25, "agent._target_=tests.test_api.ReverseMethod", "agent.name=reverse")
    gear_repro.Pipeline.from_config(cfg_b, passages=PASSAGES, questions=TOY_QUESTIONS).evaluate(run_dir=tmp_path / "b")
    df = gear_repro.load_runs([tmp_path])
    assert len(df) == 6 and set(df["run_dir"]) == {str(tmp_path / "a"), str(tmp_path / "b")}
    assert {"recall@5", "recall@10", "recall@15", "em", "f1", "tokens", "rounds", "error"} <= set(df.columns)
    per_run = df.groupby("run_dir")["recall@5"].mean()
    assert per_run[str(tmp_path / "a")] == pytest.approx(a.metrics["recall@5"])
    res = gear_repro.compare(tmp_path / "a", tmp_path / "b", "recall@5")
    assert res.n == 3
    diff = (df[df.run_dir == str(tmp_path / "a")].set_index("id")["recall@5"]
            - df[df.run_dir == str(tmp_path / "b")].set_index("id")["recall@5"]).mean()
    assert res.diff == pytest.approx(diff) and 0.0 < res.p_value <= 1.0 and not math.isnan(res.low)
    two = gear_repro.compose(*BM25, "dataset.limit=2")
    gear_repro.Pipeline.from_config(two, passages=PASSAGES, questions=TOY_QUESTIONS).evaluate(run_dir=tmp_path / "c")
    with pytest.raises(GearError, match=r"\(3 vs 2 questions, 2 shared\).* or pass intersect=True to compare") as e:
        gear_repro.compare(tmp_path / "a", tmp_path / "c", "recall@5")
    assert "--intersect" not in str(e.value)  # the CLI's flag, not this function's argument
    assert gear_repro.compare(tmp_path / "a", tmp_path / "c", "recall@5", intersect=True).n == 2


def test_public_names_are_typed_and_exported():
    root = Path(gear_repro.__file__).parent
    assert (root / "py.typed").is_file()
    for name in gear_repro.__all__:
        obj = getattr(gear_repro, name)
        assert obj.__doc__, name
    with pytest.raises(AttributeError):
        gear_repro.Runner  # noqa: B018  (private: not exported)


NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "quickstart.ipynb"


def test_notebook_is_committed_without_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


@pytest.mark.slow  # loads all-MiniLM-L6-v2 in the kernel
def test_quickstart_notebook_runs_top_to_bottom(tmp_path: Path):
    """examples/quickstart.ipynb executed cell by cell in a fresh kernel by `make notebook`'s script, as a reader
    runs it: its runs go to a temporary folder of its own (not the checkout's outputs/), and its plot shows only
    them."""
    import os
    import shutil
    import subprocess
    import sys
    import time

    from tests.helpers.requirements import require_module

    nbformat = require_module("nbformat", "make test installs it: the `notebook` extra")
    require_module("nbclient", "make test installs it: the `notebook` extra")
    require_module("ipykernel", "make test installs it: the `notebook` extra")
    repo = NOTEBOOK.parent.parent
    outputs = sorted(p.relative_to(repo) for p in (repo / "outputs").rglob("*")) if (repo / "outputs").is_dir() else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]),
           "GEAR_CACHE": str(tmp_path / "cache"), "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "TMPDIR": str(tmp_path / "tmp")}
    env.pop("QUICKSTART_OUT", None)
    (tmp_path / "tmp").mkdir()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "scripts/run_notebook.py", str(NOTEBOOK), "--out", str(tmp_path / "nb")],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    nb = nbformat.read(tmp_path / "nb" / "quickstart.ipynb", as_version=4)
    texts = ["".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.outputs)
             for c in nb.cells if c.cell_type == "code"]
    out = Path(re.search(r"runs go to (\S+)", texts[0]).group(1))
    assert out.parent == tmp_path / "tmp" and out.name.startswith("gear_repro_quickstart_")
    assert re.search(r"\d+ passages, \d+ triples, 3 questions", texts[0])
    assert "SingleStep GearAgent" in texts[1]
    assert "GEAR" in texts[2] and "BM25" in texts[2]
    assert "answerable" in texts[3] and "next_query" in texts[3]
    assert "reason" in texts[4] and "rewrite" in texts[4]
    assert "hybrid+sync+gear" in texts[5] and "bm25+none+single" in texts[5]
    plot = [c for c in nb.cells if c.cell_type == "code"][6]
    assert any("image/png" in o.get("data", {}) for o in plot.outputs)  # the recall@k figure
    methods = set(re.findall(r"^(\S.*?)\s{2,}[\d.]+", texts[6], re.M))  # the rows of the plotted table
    assert methods == {"BM25", "GEAR (2 rounds; all-minilm-l6-v2, LLM stand-in)"}, texts[6]  # its two runs only
    assert "GEAR - BM25, recall@5:" in texts[7] and "n = 3" in texts[7]
    assert (out / "gear" / "predictions.jsonl").is_file()
    now = sorted(p.relative_to(repo) for p in (repo / "outputs").rglob("*")) if (repo / "outputs").is_dir() else []
    assert now == outputs  # nothing written into the checkout
    shutil.rmtree(out)
    print(f"quickstart notebook: {seconds:.1f} s")
    assert seconds < 240, f"the notebook took {seconds:.0f} s (keep it about a minute on 2 cores)"


def test_evaluate_refuses_another_config_in_the_same_run_dir(tmp_path: Path):
    """The runner's fingerprint guards an API run dir as a CLI one: another config's results are never mixed in."""
    gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES, questions=TOY_QUESTIONS).evaluate(
        run_dir=tmp_path / "run")
    other = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25, "run.ks=[5,10]"), passages=PASSAGES,
                                            questions=TOY_QUESTIONS)
    with pytest.raises(ConfigError, match=r"holds predictions of a different config or different data \(run.ks"):
        other.evaluate(run_dir=tmp_path / "run")


def test_dataframe_questions_with_missing_cells():
    """A DataFrame's empty cells (NaN) are absent fields, as a file without them: ``type`` defaults to ""."""
    frame = pd.DataFrame([{**TOY_QUESTIONS[0]}, {k: v for k, v in TOY_QUESTIONS[1].items() if k != "type"}])
    assert frame["type"].isna().tolist() == [False, True]
    pipe = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES, questions=frame)
    assert [(q.id, q.type, q.gold_ids) for q in pipe.resources.dataset.questions] == [("q1", "2hop", ["2", "3"]),
                                                                                       ("q2", "", ["1"])]


def test_data_dir_never_pairs_new_passages_with_old_triples_nor_overwrites_a_prepared_folder(tmp_path: Path):
    """``data_dir=D`` reused D as it was: new passages without triples were read with the earlier corpus's triples,
    and a prepared folder as D had its corpus and questions overwritten. Triples of earlier records are now removed
    from a folder the API wrote; a prepared folder, or one holding other data the API did not write, is refused
    before anything is written."""
    d = tmp_path / "data"
    cfg = gear_repro.compose(*BM25)
    first = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS, triples=TRIPLES,
                                            data_dir=d)
    assert len(first.resources.dataset.triples) == 6
    other = [{"id": p["id"], "title": p["title"], "text": p["text"] + " (revised)"} for p in PASSAGES]
    second = gear_repro.Pipeline.from_config(cfg, passages=other, questions=TOY_QUESTIONS, data_dir=d)
    assert second.resources.dataset.triples is None
    assert not (d / "triples.jsonl").exists()
    assert "(revised)" in (d / "corpus.jsonl").read_text(encoding="utf-8")

    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for name in ("corpus.jsonl", "questions.jsonl", "prepare_stats.json"):
        (prepared / name).write_bytes((d / name).read_bytes() if name != "prepare_stats.json" else b"{}")
    before = {p.name: p.read_bytes() for p in prepared.iterdir()}
    with pytest.raises(DataError, match=rf"data_dir {prepared} is a folder gear-repro-prepare wrote"):
        gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS, data_dir=prepared)
    (prepared / "prepare_stats.json").unlink()
    del before["prepare_stats.json"]
    with pytest.raises(DataError, match=rf"data_dir {prepared} holds corpus.jsonl of other records, not written "
                                        "by Pipeline.from_config"):
        gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS, data_dir=prepared)
    assert {p.name: p.read_bytes() for p in prepared.iterdir()} == before


class IntIdRetriever(TitleRetriever):
    """TitleRetriever returning the corpus's ids as integers (``6`` for ``"6"``): a user's mistake."""

    def retrieve(self, query: str, k: int) -> Ranking:
        r = super().retrieve(query, k)
        return Ranking([int(i) for i in r.ids], r.scores)


class OtherCorpusRetriever(TitleRetriever):
    """TitleRetriever over another corpus's ids (``doc-0``, ...)."""

    def retrieve(self, query: str, k: int) -> Ranking:
        r = super().retrieve(query, k)
        return Ranking([f"doc-{i}" for i in r.ids], r.scores)


def test_a_user_retrievers_ids_are_checked_against_the_corpus(tmp_path: Path):
    """A user retriever's ids were not checked: integer ids (gold "6" ranked as ``6``) or ids of another corpus gave
    R@k 0.0 with exit 0 and no warning. Integer ids stop the run naming the class; unknown ids fail the question."""
    cfg = gear_repro.compose(*BM25, "retriever._target_=tests.test_api.IntIdRetriever")
    pipe = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS)
    assert isinstance(pipe.method.retriever, IntIdRetriever)
    with pytest.raises(ConfigError, match=r"^tests\.test_api\.IntIdRetriever ranked the id \d of type int \('\d' is "
                                          r"the id of one of its passages\): ids are the strings of the passages it "
                                          r"ranks"):
        pipe.evaluate(run_dir=tmp_path / "ints")
    assert (tmp_path / "ints" / "predictions.jsonl").read_text() == ""
    obj = IntIdRetriever(pipe.resources.dataset.passages)
    hit = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES, retriever=obj).retrieve(
        "Berlin", k=1)
    assert hit.error.startswith("ComponentError: tests.test_api.IntIdRetriever ranked the id 1 of type int")

    cfg = gear_repro.compose(*BM25, "retriever._target_=tests.test_api.OtherCorpusRetriever")
    ev = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS).evaluate(
        run_dir=tmp_path / "other")
    assert ev.metrics["n_errors"] == 3
    assert ev.questions["error"].tolist()[0].startswith(
        "DataError: tests.test_api.OtherCorpusRetriever ranked 6 id(s) that are none of the run's passages (first: "
        "'doc-")


_MY_RETRIEVERS = '''
from gear_repro.api import BaseRetriever
from gear_repro.types import Ranking


class ByTitle(BaseRetriever):
    name = "by_title"

    def __init__(self, passages):
        self.passages = passages

    def retrieve(self, query, k):
        words = set(query.lower().replace("?", "").split())
        scored = sorted(((len(words & set(p.title.lower().split())), -i, p.id) for i, p in enumerate(self.passages)),
                        reverse=True)[:k]
        return Ranking([s[2] for s in scored], [float(s[0]) for s in scored])


class Reversed(ByTitle):
    name = "reversed"

    def retrieve(self, query, k):
        ranking = super().retrieve(query, len(self.passages))
        return Ranking(list(reversed(ranking.ids))[:k], list(reversed(ranking.scores))[:k])
'''


def test_a_users_component_is_fingerprinted_by_its_class_and_source(tmp_path: Path, monkeypatch, caplog):
    """A retriever object of the user's is in no config setting: a resume with another class is refused naming
    both; an edit of the class's file is warned about and run.json's code history names both versions."""
    import importlib
    import logging

    from gear_repro.pipeline.run_folder import code_versions

    (tmp_path / "my_retrievers.py").write_text(_MY_RETRIEVERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = importlib.import_module("my_retrievers")
    passages = gear_repro.Pipeline.from_config(gear_repro.compose(*BM25), passages=PASSAGES).resources.dataset.passages

    def evaluate(cls, *overrides):
        cfg = gear_repro.compose(*BM25, *overrides)
        return gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS,
                                               retriever=cls(passages)).evaluate(run_dir=tmp_path / "run")

    evaluate(mine.ByTitle, "dataset.limit=2")
    with pytest.raises(ConfigError, match="user's retriever: my_retrievers.ByTitle → my_retrievers.Reversed"):
        evaluate(mine.Reversed)
    (tmp_path / "my_retrievers.py").write_text(_MY_RETRIEVERS + "\n# tuned\n")
    with caplog.at_level(logging.WARNING, logger="gear_repro"):
        evaluate(mine.ByTitle)  # the third question, run by the edited file
    assert "another version of the user's code (my_retrievers.ByTitle)" in caplog.text
    history = json.loads((tmp_path / "run" / "run.json").read_text())["code_history"]
    assert len(code_versions(history)) == 2 and [h["finished_before"] for h in history] == [0, 2]


def test_the_api_builds_through_the_public_wiring() -> None:
    """gear_repro/api/ builds a pipeline with the wiring's public functions (``provide``, ``run_method``,
    ``carry_over``): it imports no private name of another module, reaches into no other module's private attribute,
    and seeds no run object into ``Resources`` by a string key."""
    import ast

    api = Path(gear_repro.__file__).parent / "api"
    found: list[str] = []
    for path in sorted(api.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gear_repro"):
                found += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{path.name}: .{node.attr}")
        found += [f"{path.name}: {m}" for m in re.findall(r"""\[["'](?:method|passage_retriever)["']\]\s*=""", text)]
    assert found == []
