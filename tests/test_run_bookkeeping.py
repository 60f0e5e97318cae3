"""Run bookkeeping: errored questions, resume, locks, start-up checks, matched-k tokens and QA pass, report
question sets, bad input and secrets. Toy dataset + BM25 (no model needed) unless said otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gear_repro.evaluation.aggregate import aggregate
from gear_repro.llm.ledger import call_scope
from gear_repro.methods.base import MethodOutput
from gear_repro.pipeline.runner import Runner
from gear_repro.retrieval.base import BM25Retriever
from gear_repro.types import Ranking
from gear_repro.utils.errors import ConfigError, DataError
from gear_repro.utils.io import read_json
from tests.helpers.doubles import CallCounter, ScriptedLLM

REPO = Path(__file__).resolve().parent.parent


def _cfg(compose, toy_dir, *extra):
    return compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25", *extra])


def _preds(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]


@pytest.fixture
def germany_fails(monkeypatch):
    """BM25 raises for the question about Germany (q2), as a dead endpoint would."""
    orig = BM25Retriever.retrieve_many

    def flaky(self, queries, k):
        if any("Germany" in q for q in queries):
            raise ConnectionError("endpoint http://127.0.0.1:9/v1 unreachable")
        return orig(self, queries, k)

    monkeypatch.setattr(BM25Retriever, "retrieve_many", flaky)
    return monkeypatch


# -- §2 failed questions and resume ------------------------------------------------------------------------
def test_errored_question_is_a_miss_and_retried_on_resume(compose, toy_dir, tmp_path, germany_fails):
    run = tmp_path / "run"
    m = Runner(_cfg(compose, toy_dir), run).run()
    assert m["n_errors"] == 1 and m["n_questions"] == 3 and m["n_scored"] == 3
    good = Runner(_cfg(compose, toy_dir), tmp_path / "clean")  # reference numbers need a working retriever
    germany_fails.undo()
    ref = good.run()
    per_q = {p["id"]: p for p in _preds(tmp_path / "clean")}
    # q2 counts as 0, not left out: the mean is over all 3 questions
    from gear_repro.evaluation.aggregate import question_recalls

    expect = sum(question_recalls(per_q[q], [5])["recall@5"] for q in ("q1", "q3")) / 3
    assert m["recall@5"] == pytest.approx(expect) and ref["recall@5"] > m["recall@5"]
    m2 = Runner(_cfg(compose, toy_dir), run).run()  # cause fixed: the resume retries q2 only
    assert m2["n_errors"] == 0 and m2["recall@5"] == pytest.approx(ref["recall@5"])
    assert [p["id"] for p in _preds(run)] == ["q1", "q2", "q3", "q2"]


def test_errors_score_zero_in_em_f1():
    preds = [{"id": "a", "gold_ids": ["1"], "answers": ["Paris"], "rankings": {"final": ["1"]}, "answer": "Paris"},
             {"id": "b", "gold_ids": ["2"], "answers": ["Rome"], "rankings": {"final": []}, "error": "X: y"}]
    m = aggregate(preds, [5], qa=True)
    assert (m["recall@5"], m["em"], m["f1"], m["n_errors"], m["n_answered"]) == (50.0, 50.0, 50.0, 1, 1)


def test_run_with_errors_exits_non_zero_unless_allowed(toy_dir, tmp_path):
    code = ("import sys; from gear_repro.retrieval.base import BM25Retriever as B; o = B.retrieve_many\n"
            "def f(self, q, k):\n"
            "    if any('Germany' in x for x in q): raise ConnectionError('down')\n"
            "    return o(self, q, k)\n"
            "B.retrieve_many = f\nfrom gear_repro.cli.run import main\nsys.argv[0] = 'gear-repro'\nmain()\n")
    base = [sys.executable, "-c", code, f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25",
            "run.progress=false"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEAR_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([*base, f"hydra.run.dir={tmp_path}/a"], capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 1 and "1 of 3 questions failed" in r.stderr
    r = subprocess.run([*base, f"hydra.run.dir={tmp_path}/b", "run.allow_errors=true"], capture_output=True,
                       text=True, env=env, cwd=REPO)
    assert r.returncode == 0 and "1 of 3 questions failed" in r.stderr


def test_resume_fingerprint_covers_the_data(compose, toy_dir, tmp_path):
    run = tmp_path / "run"
    Runner(_cfg(compose, toy_dir), run).run()
    q = toy_dir / "questions.jsonl"
    q.write_text(q.read_text().replace("capital of Germany", "capital of France"), encoding="utf-8")
    with pytest.raises(ConfigError, match="different config or different data"):
        Runner(_cfg(compose, toy_dir), run).run()


def test_refused_resume_names_what_differs_and_moved_data_resumes(compose, toy_dir, tmp_path, caplog):
    """A refused resume names the differing settings (old → new, secrets as ***) and data files; a byte-identical
    copy of the data (another clone or mount of the repo) resumes: the data are identified by content, not by
    dataset.path. A run dir fingerprinted with dataset.path (before) resumes from its path."""
    import shutil

    from gear_repro.pipeline.resume import data_fingerprint

    run = tmp_path / "run"
    Runner(_cfg(compose, toy_dir, "dataset.limit=2"), run).run()
    for extra, said in ((["run.ks=[5,10]"], "run.ks: [5, 10, 15] → [5, 10]"),
                        (["dataset.subset=stratified"], 'dataset.subset: "first" → "stratified"'),
                        (["+llm.params.extra_headers={X-Key: SeCrEt-99}"], "(unset) → \"***\"")):
        with pytest.raises(ConfigError, match="different config or different data") as e:
            Runner(_cfg(compose, toy_dir, "dataset.limit=2", *extra), run).run()
        assert said in str(e.value) and "SeCrEt-99" not in str(e.value), str(e.value)
    copy = shutil.copytree(toy_dir, tmp_path / "copy")
    assert Runner(_cfg(compose, copy, "dataset.limit=3"), run).run()["n_questions"] == 3
    q = copy / "questions.jsonl"
    q.write_text(q.read_text().replace("capital of Germany", "capital of Spain"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"the questions file's content \(sha256 \w+ → \w+\)"):
        Runner(_cfg(compose, copy), run).run()
    # a run dir of the format before: its fingerprint held dataset.path, accepted from that path only
    cfg, run = _cfg(compose, toy_dir), tmp_path / "old"
    Runner(cfg, run).run()
    hashes = read_json(run / "run.json")["data_hashes"]
    for name in ("run.json", "metrics.json"):
        (run / name).write_text(json.dumps({**read_json(run / name),
                                            "fingerprint": data_fingerprint(cfg, hashes, with_path=True)}))
    with caplog.at_level("INFO", logger="gear_repro"):
        Runner(cfg, run).run()  # re-scored once (no question runs again), under the new fingerprint
    assert "format that held dataset.path" in caplog.text
    assert read_json(run / "run.json")["fingerprint"] == read_json(run / "metrics.json")["fingerprint"] == \
        data_fingerprint(cfg, hashes)
    (run / "run.json").write_text(json.dumps({**read_json(run / "run.json"),
                                              "fingerprint": data_fingerprint(_cfg(compose, tmp_path / "elsewhere"),
                                                                              hashes, with_path=True)}))
    with pytest.raises(ConfigError, match="no setting of its config.yaml and no data file differs"):
        Runner(cfg, run).run()
    # a refused resume into a dir whose config.yaml is gone does not write its own there (the
    # next refusal compared the new config with itself and named nothing)
    (run / "config.yaml").unlink()
    with pytest.raises(ConfigError, match="different config or different data"):
        Runner(_cfg(compose, toy_dir, "run.ks=[5,10]"), run).run()
    assert not (run / "config.yaml").exists()


def test_resume_fingerprint_covers_the_llm_endpoint(compose, toy_dir):
    """Another server may serve another model: its replies never join a run of the first;
    credentials in the URL are not part of it (a rotated key is the same endpoint); no base_url: as before."""
    from gear_repro.pipeline.resume import run_fingerprint

    def fp(*extra):
        return run_fingerprint(_cfg(compose, toy_dir, "llm=openai_compatible", *extra))

    a = fp("llm.base_url=http://a:8000/v1")
    assert a != fp("llm.base_url=http://b:8000/v1")
    assert fp("llm.base_url='http://u:k1@a:8000/v1?key=s1'") == fp("llm.base_url='http://u:k2@a:8000/v1?key=s2'")


def test_a_resume_over_another_openai_base_url_is_refused_naming_both(compose, toy_dir, tmp_path, monkeypatch):
    """llm.base_url unset: the endpoint the SDK reads from OPENAI_BASE_URL is part of the fingerprint, recorded in
    run.json (masked), so a resume over another one is refused naming both, with no credential or key printed."""
    run = tmp_path / "run"
    cfg = lambda: _cfg(compose, toy_dir, "llm=openai")  # noqa: E731
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:S3KRETPW@llm-a.example:8000/v1?key=S3KRETQ")
    Runner(cfg(), run).run()
    assert "S3KRET" not in (run / "run.json").read_text()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm-b.example:8000/v1")
    with pytest.raises(ConfigError) as refused:
        Runner(cfg(), run).run()
    message = str(refused.value)
    assert 'llm.endpoint: "http://***@llm-a.example:8000/v1?key=***" → "http://llm-b.example:8000/v1"' in message
    assert "S3KRET" not in message
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:ROTATED@llm-a.example:8000/v1?key=ROTATED")
    assert Runner(cfg(), run).run()["n_questions"] == 3  # a rotated key is the same endpoint: resumed


def test_models_given_by_path_are_identified_by_content(compose, toy_dir, tmp_path):
    """Two local model folders with one name, a folder retrained in place and another GGUF under the local server's
    alias never share embeddings, replies or a resume (hostile probe s19 1.1, 1.2); names and the packaged models
    keep their keys (the caches and run dirs written before stay valid)."""
    from gear_repro.embedding.embedder import SentenceEmbedder
    from gear_repro.llm.client import LLMClient
    from gear_repro.pipeline.resume import run_fingerprint
    from gear_repro.utils.hashing import files_identity

    a, b = tmp_path / "run1" / "model", tmp_path / "run2" / "model"
    for d, w in ((a, b"weights A" * 300_000), (b, b"weights B" * 300_000)):
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        (d / "model.safetensors").write_bytes(w)
    assert files_identity(a) != files_identity(b)
    assert files_identity(a) == files_identity(a.rename(tmp_path / "moved")) and (tmp_path / "moved").rename(a)
    emb = lambda m: SentenceEmbedder(str(m), cache=False, show_progress=False).model_id  # noqa: E731
    assert emb(a) != emb(b) and emb("all-MiniLM-L6-v2") == "9665ad26b9ea"  # a name: its key as before
    fp = lambda *o: run_fingerprint(_cfg(compose, toy_dir, "retriever=sbert", *o))  # noqa: E731
    before = fp(f"embedder.model={a}")
    (a / "model.safetensors").write_bytes(b"weights C" * 300_000)  # retrained in place: same path, same size
    assert fp(f"embedder.model={a}") != before and fp(f"embedder.model={a}") != fp(f"embedder.model={b}")
    assert fp("embedder.model=all-MiniLM-L6-v2") == fp("embedder.model=all-MiniLM-L6-v2")

    g1, g2 = tmp_path / "q4.gguf", tmp_path / "q8.gguf"
    g1.write_bytes(b"GGUF" + b"1" * 5_000_000)
    g2.write_bytes(b"GGUF" + b"2" * 5_000_000)
    local = lambda path: LLMClient(model="qwen2.5-coder-1.5b-instruct-q4_k_m",  # noqa: E731
                                   server={"model_path": path}, cache=False)
    assert local(str(g1)).endpoint.startswith("gguf:") and local(str(g1)).endpoint != local(str(g2)).endpoint
    assert local("qwen").endpoint is None  # the packaged model: the reply cache's keys as before
    fpl = lambda path: run_fingerprint(_cfg(compose, toy_dir, "llm=local", f"llm.server.model_path={path}"))  # noqa: E731
    assert fpl(g1) != fpl(g2) and fpl("qwen") == fpl("qwen")
    # claims pair runs on `same: llm.model`, the served alias: runs served from two GGUF files are not a pair
    from gear_repro.reporting.claims import _same
    from gear_repro.reporting.runs import RunResult

    run = lambda path: RunResult(tmp_path, {"llm": {"model": "qwen", "server": {"model_path": path}}}, {})  # noqa: E731
    assert _same(run("qwen"), run("qwen"), ["llm.model"]) and not _same(run("qwen"), run(str(g1)), ["llm.model"])


def test_a_model_given_by_path_is_read_once_per_process_with_the_keys_as_before(compose, toy_dir, tmp_path,
                                                                                 monkeypatch):
    """A bf16 embedder and its fp32 query twin, the run fingerprint and the LLM client read a model given by path
    once per process (multi-GB weights); the keys of vectors, replies and runs are those written before (their
    caches and run dirs stay valid); a file changed in place is read again."""
    import gear_repro.embedding.embedder as E
    import gear_repro.pipeline.resume as R
    from gear_repro.embedding.precision import Precision
    from gear_repro.llm.client import LLMClient
    from gear_repro.utils import hashing

    monkeypatch.setattr(hashing, "_IDENTITIES", {})
    spy = CallCounter(hashing.files_identity)
    monkeypatch.setattr(hashing, "files_identity", spy)
    monkeypatch.setattr(E, "resolve_precision", lambda precision, device, backend: Precision(precision))
    fingerprinted: list[dict] = []
    monkeypatch.setattr(R, "hash_obj", lambda c: fingerprinted.append(c) or hashing.hash_obj(c))
    model, gguf = tmp_path / "fixed" / "model", tmp_path / "fixed" / "w.gguf"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"fixed weights" * 300_000)
    gguf.write_bytes(b"GGUF" + b"7" * 3_000_000)

    emb = E.SentenceEmbedder(str(model), cache=False, show_progress=False, precision="bf16")
    assert emb.queries is not emb and emb.queries.model_id == "7dca6a8638c5"  # the fp32 key older runs recorded
    for _ in range(2):
        R.run_fingerprint(_cfg(compose, toy_dir, "llm=local", f"llm.server.model_path={gguf}",
                               f"embedder.model={model}"))
    assert fingerprinted[-1]["embedder"]["files"] == "144fc28b4af082f4"
    assert fingerprinted[-1]["llm"]["weights"] == "gguf:da18abb6b23a9715"
    assert LLMClient(model="x", server={"model_path": str(gguf)}, cache=False).endpoint == "gguf:da18abb6b23a9715"
    assert spy.calls == {str(model): 1, str(gguf): 1}

    (model / "config.json").write_text('{"retrained": 1}')
    assert E.SentenceEmbedder(str(model), cache=False, show_progress=False).model_id != "7dca6a8638c5"
    assert spy.calls[str(model)] == 2


def test_data_prepared_from_another_dataset_is_refused(compose, toy_dir, tmp_path):
    """A folder prepared from HotpotQA data run under the default (MuSiQue) group would be tabled as MuSiQue, with
    MuSiQue's answer script and rounds: refused before any work, naming the group to use."""
    from gear_repro.pipeline.resources import Resources

    (toy_dir / "prepare_stats.json").write_text(json.dumps({"format": "hotpotqa", "dataset": "hotpotqa"}))
    with pytest.raises(ConfigError, match=r"prepared from HotpotQA data .* dataset\.paper_name is MuSiQue .* "
                                          r"dataset=hotpotqa dataset\.path="):
        assert Resources(_cfg(compose, toy_dir)).dataset
    assert Resources(_cfg(compose, toy_dir, "dataset.paper_name=HotpotQA")).dataset.questions


def test_data_prepared_from_an_unknown_source_is_refused_unless_allowed(compose, toy_dir, tmp_path):
    """A folder whose prepare_stats.json names no known dataset (an older `--format hipporag` prepare of a renamed
    file says "hipporag") was accepted under any group: HotpotQA numbers in the MuSiQue column."""
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.resume import run_fingerprint

    (toy_dir / "prepare_stats.json").write_text(json.dumps({"format": "hipporag", "dataset": "hipporag"}))
    with pytest.raises(ConfigError, match=rf"dataset\.path={toy_dir}: its prepare_stats\.json records the source "
                                          r"dataset as 'hipporag'.*gear-repro-prepare --dataset .*"
                                          r"dataset\.allow_unknown_source=true"):
        assert Resources(_cfg(compose, toy_dir)).dataset
    allowed = _cfg(compose, toy_dir, "dataset.allow_unknown_source=true")
    assert Resources(allowed).dataset.questions
    assert run_fingerprint(allowed) == run_fingerprint(_cfg(compose, toy_dir))  # a start-up check, not a result
    (toy_dir / "prepare_stats.json").unlink()  # a hand-made folder records nothing: as before
    assert Resources(_cfg(compose, toy_dir)).dataset.questions


@pytest.mark.parametrize("line", ['{"question": "no id"}', '{"id": "q1", "rankings": "oops"}', '{"id": "q2"}'])
def test_a_foreign_prediction_line_is_named_on_resume_and_in_the_report(compose, toy_dir, tmp_path, line, capsys):
    from gear_repro.cli.report import main as report_main

    run = tmp_path / "run"
    Runner(_cfg(compose, toy_dir, "dataset.limit=2"), run).run()
    with open(run / "predictions.jsonl", "a") as f:
        f.write(line + "\n")
    with pytest.raises(DataError, match=r"predictions\.jsonl:3: not a prediction record of this harness"):
        Runner(_cfg(compose, toy_dir, "dataset.limit=2"), run).run()
    assert report_main([str(run), "--out", str(tmp_path / "rep")]) == 2
    assert "predictions.jsonl:3: not a prediction record" in capsys.readouterr().err


def test_run_dir_lock(compose, toy_dir, tmp_path):
    from gear_repro.utils.lock import LOCK_FILE, process_start

    run = tmp_path / "run"
    run.mkdir()
    import socket

    parent = os.getppid()  # a live process that is not us
    (run / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": parent,
                                             "start": process_start(parent)}))
    with pytest.raises(ConfigError, match=f"in use by process {parent}"):
        Runner(_cfg(compose, toy_dir), run).run()
    assert not (run / "predictions.jsonl").exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid is free
    (run / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "start": "1"}))
    m = Runner(_cfg(compose, toy_dir), run).run()  # stale lock taken over
    assert m["n_questions"] == 3 and not (run / LOCK_FILE).exists()
    # a live pid whose start time differs (pid reused by another process) is stale too
    (run / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": parent, "start": "-1"}))
    assert Runner(_cfg(compose, toy_dir), run).run()["n_questions"] == 3


@pytest.mark.parametrize("override,msg", [
    ("run.save_depth=10", r"run.save_depth \(10\) must be >= max\(run.ks\) \(15\)"),
    ("run.save_depth=0", r"run.save_depth must be >= 1 \(got 0\)"),
    # ran the k=5 pass twice for the same numbers
    ("run.ks=[5,5,15]", r"run.ks lists 5 more than once \(\[5, 5, 15\]\): each rank is evaluated once; use "
                        r"run.ks=\[5, 15\]"),
    ("dataset.limit=0", r"dataset.limit must be >= 1 \(got 0\)"),  # the schema's range (null = all questions)
    ("dataset.limit=-1", r"dataset.limit must be >= 1 \(got -1\)"),
    ("beam.scorer=foo", "beam.scorer 'foo' is unknown"),
    ("llm.api_key_env=sk-SENTINEL-0123456789", "looks like a key itself"),
])
def test_config_errors_before_any_question(compose, toy_dir, tmp_path, override, msg):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=msg) as e:
        Runner(_cfg(compose, toy_dir, override), run).run()
    assert "SENTINEL" not in str(e.value)
    assert not (run / "predictions.jsonl").exists()


def test_missing_api_key_found_at_start_up(compose, toy_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("GEAR_TEST_NO_SUCH_KEY", raising=False)
    cfg = _cfg(compose, toy_dir, "llm=openai", "llm.api_key_env=GEAR_TEST_NO_SUCH_KEY", "expansion=sync",
               "embedder=minilm")
    with pytest.raises(ConfigError, match="no API key: set the environment variable GEAR_TEST_NO_SUCH_KEY"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_prepare_rejects_bad_limit_and_paths(tmp_path, capsys):
    from gear_repro.cli.prepare import main

    q = tmp_path / "q.json"
    q.write_text("[]")
    assert main(["--format", "musique", "--questions", str(q), "--limit", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--limit must be a positive" in capsys.readouterr().err
    assert main(["--format", "musique", "--questions", str(q), "--triples-hipporag", str(tmp_path / "nope.json"),
                 "--out", str(tmp_path / "o")]) == 2
    assert "--triples-hipporag file not found" in capsys.readouterr().err
    assert main(["--format", "musique", "--questions", str(q), "--out", str(q)]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and len(err.strip().splitlines()) == 1


# -- §5 tokens (Fig. 4) and Table 3's QA pass ----------------------------------------------------------------
class _KMethod:
    """k-dependent stand-in: one 'read' call of 100*k prompt tokens per pass; ranking depends on k."""

    name = "k_method"
    k_dependent = True
    needs_llm = False
    answers_questions = False
    max_rounds = None

    def __init__(self, llm):
        self.llm = llm

    def run(self, q, k):
        self.llm.ledger.add(stage="read", round=0, prompt_tokens=100 * k, completion_tokens=k)
        return MethodOutput(ranking=Ranking([f"p{k}-{i}" for i in range(k)], [1.0] * k))


class _QA:
    top_k = 5

    def __init__(self, llm):
        self.llm, self.seen = llm, []

    def answer(self, q, ids, metric="hotpotqa"):
        self.seen.append(list(ids))
        self.llm.ledger.add(stage="qa", round=0, prompt_tokens=7, completion_tokens=1)
        return {"answer": "x"}


def test_matched_k_calls_tagged_and_qa_reads_the_k5_pass(compose, toy_dir, tmp_path):
    from gear_repro.pipeline.resources import Resources

    cfg = _cfg(compose, toy_dir)
    llm = ScriptedLLM({})  # its ledger records the stand-ins' calls
    r = Runner(cfg, tmp_path / "run", resources=Resources(cfg, llm=llm))
    qa = _QA(llm)
    q = r.res.dataset.questions[0]
    with call_scope() as calls:
        rec = r._one(q, _KMethod(llm), qa, calls)
    assert qa.seen == [[f"p5-{i}" for i in range(5)]]  # Table 3: the k=5 pass, not k=15
    assert [(c["stage"], c["k"]) for c in rec["llm_calls"]] == [("read", 5), ("read", 10), ("read", 15), ("qa", None)]
    m = aggregate([rec], [5, 10, 15], qa=True)
    assert m["tokens_per_question"]["prompt"] == 1500 + 7  # one run at k=15 (+QA), not 500+1000+1500+7
    assert m["tokens_per_question_by_k"]["5"]["prompt"] == 507 and m["tokens_k"] == 15
    errored = {"id": "q9", "gold_ids": ["0"], "rankings": {"final": []}, "error": "LLMCallError: down",
               "llm_calls": [{"stage": "read", "k": 5, "prompt_tokens": 0, "completion_tokens": 0}]}
    m2 = aggregate([rec, errored], [5, 10, 15], qa=True)  # an errored question costs nothing: not in the mean
    assert m2["tokens_per_question"] == m["tokens_per_question"] and m2["n_errors"] == 1


# -- report: question set by id, partial lines, unfinished and stale runs, n_errors ----------------------------
def test_report_takes_the_recorded_question_set(compose, toy_dir, tmp_path, germany_fails, capsys):
    from gear_repro.cli.report import main as report_main
    from gear_repro.reporting.analyses import load_predictions
    from gear_repro.reporting.runs import find_runs

    run = tmp_path / "runs" / "a"
    Runner(_cfg(compose, toy_dir, "dataset.subset=stratified", "dataset.limit=2", "run.allow_errors=true"), run).run()
    metrics = read_json(run / "metrics.json")
    ids = metrics["question_ids"]
    assert len(ids) == 2 and metrics["question_ids_hash"]
    (r,) = find_runs([tmp_path / "runs"])
    assert [p["id"] for p in load_predictions(r)] == ids  # by id, not the first `limit` lines
    # a partial last line (killed writer) is dropped with a warning; --trace still works
    with open(run / "predictions.jsonl", "a") as f:
        f.write('{"id": "q9", "rank')
    unfinished = tmp_path / "runs" / "b"
    unfinished.mkdir()
    (unfinished / "predictions.jsonl").write_text(json.dumps({"id": "q1", "rankings": {"final": []}}) + "\n")
    assert report_main([str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr()
    assert "dropped a partial last line" in out.err and "unfinished run(s)" in out.err and str(unfinished) in out.err
    table = (tmp_path / "rep" / "table.md").read_text()
    assert "errors" in table
    csv = (tmp_path / "rep" / "table.csv").read_text().splitlines()
    assert csv[0].split(",").count("n_errors") == 1
    assert report_main([str(tmp_path / "runs"), "--trace", ids[0]]) == 0
    assert report_main([str(tmp_path / "runs"), "--out", str(run / "metrics.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_failed_run_records_its_error_for_the_report_and_a_finished_rerun_skips(compose, toy_dir, tmp_path, capsys,
                                                                                 monkeypatch, caplog):
    """A run that raises leaves failure.json, which the report lists under unfinished runs with the error;
    the next attempt that finishes removes it, and one more run of the finished dir does no work."""
    from gear_repro.cli.report import main as report_main

    runs = tmp_path / "runs"
    Runner(_cfg(compose, toy_dir, "dataset.limit=2"), runs / "ok").run()
    broken = runs / "broken"

    def boom(*_a, **_k):
        raise RuntimeError("index server went away")

    with monkeypatch.context() as m:
        m.setattr("gear_repro.pipeline.runner.run_method", boom)
        with pytest.raises(RuntimeError):
            Runner(_cfg(compose, toy_dir, "dataset.limit=2"), broken).run()
    assert read_json(broken / "failure.json")["error"] == "RuntimeError: index server went away"
    assert report_main([str(runs), "--out", str(tmp_path / "rep")]) == 0
    listed = (tmp_path / "rep" / "failures.md").read_text()
    assert str(broken) in listed and "RuntimeError: index server went away" in listed and "BM25" in listed
    assert "RuntimeError: index server went away" in capsys.readouterr().out
    first = Runner(_cfg(compose, toy_dir, "dataset.limit=2"), broken).run()
    assert not (broken / "failure.json").exists()
    preds = (broken / "predictions.jsonl").read_bytes()
    with monkeypatch.context() as m, caplog.at_level("INFO", logger="gear_repro"):
        m.setattr("gear_repro.pipeline.runner.run_method", boom)  # a finished run builds nothing
        assert Runner(_cfg(compose, toy_dir, "dataset.limit=2"), broken).run() == first
    assert (broken / "predictions.jsonl").read_bytes() == preds and "already finished its 2 questions" in caplog.text


def test_report_flags_stale_metrics(compose, toy_dir, tmp_path, capsys):
    from gear_repro.cli.report import main as report_main

    run = tmp_path / "a"
    Runner(_cfg(compose, toy_dir, "dataset.limit=1"), run).run()
    Runner(_cfg(compose, toy_dir, "dataset.limit=3"), run).run()
    (run / "metrics.json").write_text(json.dumps({**read_json(run / "metrics.json"), "question_ids": ["q1"]}))
    assert report_main([str(run), "--out", str(tmp_path / "rep")]) == 0
    assert "metrics.json scores 1 questions but predictions.jsonl has 3 finished" in capsys.readouterr().err


def test_report_does_not_call_a_shrunk_run_unfinished(compose, toy_dir, tmp_path, capsys):
    """dataset.limit 1, then 3, then 2: the run scored the 2 it asked for on purpose (predictions.jsonl keeps the
    third): no "extended run that did not finish" note; an extension that did not finish
    still gets it, naming what its last start asked for."""
    from gear_repro.cli.report import main as report_main
    from gear_repro.reporting.runs import find_runs

    run = tmp_path / "a"
    for limit in (1, 3, 2):
        Runner(_cfg(compose, toy_dir, f"dataset.limit={limit}"), run).run()
    assert len(_preds(run)) == 3 and find_runs([run])[0].notes == []
    assert report_main([str(run), "--out", str(tmp_path / "rep")]) == 0
    assert "did not finish" not in capsys.readouterr().err
    run_json = read_json(run / "run.json")  # a resume to 3 that stopped after its start was recorded
    (run / "run.json").write_text(json.dumps({**run_json, "subset": {**run_json["subset"], "size": 3,
                                                                     "ids": ["q1", "q2", "q3"]}}))
    assert "predictions.jsonl has 3 finished ones (its last start asked for 3) (an extended run that did not " \
           "finish)" in find_runs([run])[0].notes[0]


def test_explorer_provenance_of_an_unfinished_extension_says_what_was_scored(compose, toy_dir, tmp_path):
    """run.json is written at each (re)start: after a resume to a larger dataset.limit that did not finish, the
    explorer's provenance said "limit 3, size 3" beside the 1 question the tables score."""
    from gear_repro.reporting.html.data import run_provenance
    from gear_repro.reporting.runs import find_runs

    run = tmp_path / "a"
    Runner(_cfg(compose, toy_dir, "dataset.limit=1"), run).run()
    Runner(_cfg(compose, toy_dir, "dataset.limit=3"), run).run()
    (run / "metrics.json").write_text(json.dumps({**read_json(run / "metrics.json"), "question_ids": ["q1"]}))
    subset = run_provenance(find_runs([run])[0])["subset"]
    assert subset["size"] == 3 and subset["scored"].startswith("1 (metrics.json: the last finished attempt")


def test_report_names_damaged_run_files(compose, toy_dir, tmp_path, capsys):
    """predictions.jsonl missing questions that metrics.json scored is said; a metrics.json / run.json that is not
    a JSON object is one line naming the file, in the report and on resume (not an AttributeError)."""
    from gear_repro.cli.report import main as report_main

    run = tmp_path / "a"
    Runner(_cfg(compose, toy_dir, "dataset.limit=3"), run).run()
    lines = (run / "predictions.jsonl").read_text().splitlines()
    (run / "predictions.jsonl").write_text(lines[0] + "\n")
    assert report_main([str(run), "--out", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert "predictions.jsonl lacks 2 of the 3 questions metrics.json scored" in err
    assert "its cells, intervals and per-question analyses are over the 1 present (n=1), not metrics.json's 3" in err
    assert " n=1" in (tmp_path / "rep" / "table.md").read_text()  # what the warning says the cells are
    for bad, kind in (("null", "null"), ("[1, 2]", "array")):
        (run / "metrics.json").write_text(bad)
        assert report_main([str(run), "--out", str(tmp_path / "rep")]) == 2
        assert f"metrics.json: expected a JSON object, got {kind}" in capsys.readouterr().err
        with pytest.raises(DataError, match=f"metrics.json: expected a JSON object, got {kind}"):
            Runner(_cfg(compose, toy_dir, "dataset.limit=3"), run).run()
    (run / "metrics.json").unlink()
    (run / "run.json").write_text("3")
    with pytest.raises(DataError, match="run.json: expected a JSON object, got number"):
        Runner(_cfg(compose, toy_dir, "dataset.limit=3"), run).run()


# -- §3 bad input --------------------------------------------------------------------------------------------
def test_non_utf8_input_names_file_and_line(compose, toy_dir, tmp_path):
    c = toy_dir / "corpus.jsonl"
    lines = c.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"Western", b"W\xe9stern")
    c.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=r"corpus.jsonl:3: not UTF-8 text \(byte 0xe9 at column \d+\)"):
        Runner(_cfg(compose, toy_dir), tmp_path / "run").run()


@pytest.mark.parametrize("field,value,msg", [
    ("question", "  ", "empty question text"),
    ("gold_ids", ["2", None], "null or empty entry in 'gold_ids'"),
    ("answers", [None], "null or empty entry in 'answers'"),
])
def test_empty_question_and_null_gold_are_reported(toy_dir, field, value, msg):
    from gear_repro.data.dataset import load_dataset

    q = toy_dir / "questions.jsonl"
    rows = [json.loads(x) for x in q.read_text().splitlines()]
    rows[1][field] = value
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=f"questions.jsonl:2: question 'q2' has an? {msg}"):
        load_dataset(toy_dir)


# -- §3-4 the command line: secrets, run dir a file, Ctrl-C ------------------------------------------------------
SENTINEL = "sk-SENTINEL-9f8e7d6c5b4a"


def _cli(args, tmp_path, code="from gear_repro.cli.run import main; import sys; sys.argv[0]='gear-repro'; main()"):
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEAR_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO)


def _files_with(root: Path, needle: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


def test_no_secret_reaches_disk(toy_dir, tmp_path):
    run = tmp_path / "run"
    r = _cli([f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=false",
              f"hydra.run.dir={run}", f"+extraction.params.api_key={SENTINEL}", f"+extraction.params.password={SENTINEL}",
              # a whole map holding a header or a secret key (any depth), and a bare `key` (a query parameter)
              f"report.labels={{extra_headers: {{Authorization: Bearer {SENTINEL}}}, deep: {{x: {{api_key: {SENTINEL}}}}}}}",
              f"+extraction.params.extra_query.key={SENTINEL}"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (run / ".hydra" / "overrides.yaml").exists() and (run / "config.yaml").exists()
    assert "oc.env:GEAR_REPRO_SECRET_" in (run / ".hydra" / "overrides.yaml").read_text()
    assert _files_with(tmp_path, SENTINEL) == [] and SENTINEL not in r.stdout + r.stderr
    # a key passed as the variable's NAME: refused before anything is written, value not echoed
    r = _cli([f"dataset.path={toy_dir}", "retriever=bm25", f"hydra.run.dir={tmp_path}/run2",
              f"llm.api_key_env={SENTINEL}"], tmp_path)
    assert r.returncode == 2 and "looks like a key itself" in r.stderr and SENTINEL not in r.stderr
    assert not (tmp_path / "run2").exists() and _files_with(tmp_path, SENTINEL) == []
    # the key as a setting the LLM does not have: one line pointing at api_key_env (Hydra would suggest `+llm.api_key`)
    r = _cli([f"dataset.path={toy_dir}", "retriever=bm25", f"hydra.run.dir={tmp_path}/run3", f"+llm.api_key={SENTINEL}"],
             tmp_path)
    assert r.returncode == 2 and "llm.api_key is not a setting (value not shown)" in r.stderr
    assert SENTINEL not in r.stdout + r.stderr and not (tmp_path / "run3").exists()


def test_an_optimized_metric_the_run_lacks_is_said(toy_dir, tmp_path):
    r = _cli([f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=false",
              f"hydra.run.dir={tmp_path / 'run'}", "optimized_metric=bogus"], tmp_path)
    assert r.returncode == 0 and "optimized_metric=bogus is not a number of this run's metrics.json" in r.stderr
    assert "recall@15" in r.stderr


def test_ctrl_c_with_question_workers_waiting_on_the_llm_exits_at_once(toy_dir, tmp_path):
    """run.workers=2, every LLM request held for minutes: SIGINT ends the run within seconds (130, one line, lock
    released) instead of joining the waiting question threads for llm.timeout_s × retries."""
    import signal
    import time

    from tests.helpers.standin_server import StandInServer

    run = tmp_path / "run"
    with StandInServer(latency_s=300) as s:
        # PYTHONFAULTHANDLER: a run that does not exit is aborted below and prints every thread's stack
        env = {**os.environ, "PYTHONPATH": str(REPO), "GEAR_CACHE": str(tmp_path / "cache"), "PYTHONFAULTHANDLER": "1"}
        # a suite started in the background (`make test &`) ignores SIGINT, and a child inherits that: the run is
        # given the disposition of a terminal's foreground job, where Ctrl-C is delivered
        p = subprocess.Popen([sys.executable, "-c", "import sys; sys.argv[0] = 'gear-repro'; "
                              "from gear_repro.cli.run import main; main()", f"dataset.path={toy_dir}",
                              "dataset.name=toy", "retriever=bm25", "agent=ircot", "llm=openai_compatible",
                              f"llm.base_url={s.url}", "llm.max_retries=0", "run.workers=2", "run.progress=false",
                              f"hydra.run.dir={run}"], env=env, cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.time() + 120
        while s.n_requests < 2 and time.time() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert s.n_requests >= 2, p.communicate(timeout=5)
        t = time.time()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            out, err = p.communicate(timeout=30)
            pytest.fail(f"no exit 30 s after SIGINT; the threads when aborted:\n{err[-6000:]}\nstdout: {out[-2000:]}")
    assert p.returncode == 130 and time.time() - t < 15
    assert err.strip().splitlines()[-1].startswith("interrupted: finished questions are saved in")
    assert not (run / ".lock").exists()


def test_multirun_keeps_secrets_off_disk(toy_dir, tmp_path):
    sweep = tmp_path / "sweep"
    r = _cli(["-m", f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=false",
              f"hydra.sweep.dir={sweep}", f"+extraction.params.password={SENTINEL}", "run.ks=[5],[5,10]"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (sweep / "multirun.yaml").exists() and _files_with(tmp_path, SENTINEL) == []


def test_run_dir_that_is_a_file_is_one_line(toy_dir, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    r = _cli([f"dataset.path={toy_dir}", "retriever=bm25", f"hydra.run.dir={f}/sub"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"error: hydra.run.dir {f}/sub: {f} is a file, not a folder"


def test_ctrl_c_is_one_line_and_resumable(toy_dir, tmp_path):
    run = tmp_path / "run"
    code = ("import sys; from gear_repro.retrieval.base import BM25Retriever as B; o = B.retrieve_many\n"
            "def f(self, q, k):\n"
            "    if any('Germany' in x for x in q): raise KeyboardInterrupt\n"
            "    return o(self, q, k)\n"
            "B.retrieve_many = f\nfrom gear_repro.cli.run import main\nsys.argv[0] = 'gear-repro'\nmain()\n")
    args = [f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=false",
            f"hydra.run.dir={run}"]
    r = _cli(args, tmp_path, code)
    assert r.returncode == 130 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("interrupted: finished questions are saved in")
    assert [p["id"] for p in _preds(run)] == ["q1"] and not (run / ".lock").exists()
    r = _cli(args, tmp_path)
    assert r.returncode == 0 and [p["id"] for p in _preds(run)] == ["q1", "q2", "q3"]


def test_a_refused_command_leaves_the_live_runs_log_alone(toy_dir, tmp_path):
    """A second command into a run dir another live process holds is refused on the console only: Hydra has already
    opened that dir's run.log, which is the live run's own log."""
    import socket

    from gear_repro.utils.lock import LOCK_FILE, process_start

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.log").write_text("the live run's log\n")
    parent = os.getppid()
    (run / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": parent,
                                             "start": process_start(parent)}))
    r = _cli([f"dataset.path={toy_dir}", "retriever=bm25", "run.progress=false", f"hydra.run.dir={run}"], tmp_path)
    assert r.returncode == 2 and f"in use by process {parent}" in r.stderr
    assert (run / "run.log").read_text() == "the live run's log\n"


def test_an_extraction_resumes_only_with_its_own_model_and_settings(compose, toy_dir, tmp_path):
    """stage=extract into a dir holding another model's triples is refused (its triples.jsonl would mix two LLMs); more passages with the same model extend it."""
    from gear_repro.data import load_dataset
    from gear_repro.pipeline.resources import Resources
    from tests.helpers.doubles import ExtractionLLM

    passages = load_dataset(toy_dir).passages
    run = tmp_path / "ex"

    def extract(*overrides: str) -> dict:
        cfg = _cfg(compose, toy_dir, "stage=extract", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1",
                   *overrides)
        return Runner(cfg, run, resources=Resources(cfg, llm=ExtractionLLM(passages))).run()

    assert extract("llm.model=model-a", "dataset.limit_passages=2")["n_done"] == 2
    with pytest.raises(ConfigError, match=r"holds extracted triples of a different config or different data"):
        extract("llm.model=model-b", "dataset.limit_passages=4")
    assert extract("llm.model=model-a", "dataset.limit_passages=4")["n_done"] == 4  # extended, same model


def test_a_resume_with_edited_prompt_files_is_refused(compose, toy_dir, tmp_path, monkeypatch):
    """An LLM run records its prompt files' hash; resuming it after a template was edited would mix two prompts in
    one run, so it is refused. A run without an LLM records none."""
    from gear_repro.pipeline import resume_guard
    from gear_repro.pipeline.resources import Resources
    from tests.helpers.doubles import ScriptedLLM

    run = tmp_path / "qa"

    def qa(limit: int) -> dict:
        cfg = _cfg(compose, toy_dir, "qa=true", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1",
                   f"dataset.limit={limit}")
        return Runner(cfg, run, resources=Resources(cfg, llm=ScriptedLLM())).run()

    qa(1)
    assert json.loads((run / "run.json").read_text())["prompts"] == resume_guard.prompts_hash()
    monkeypatch.setattr(resume_guard, "prompts_hash", lambda: "0123456789abcdef")
    with pytest.raises(ConfigError, match=r"holds predictions made with other prompt files"):
        qa(2)
    Runner(_cfg(compose, toy_dir), tmp_path / "bm25").run()
    assert "prompts" not in json.loads((tmp_path / "bm25" / "run.json").read_text())


def test_a_partial_triples_file_is_recorded_and_noted_by_the_report(compose, toy_dir, tmp_path, capsys):
    """A triples file covering 1 of 6 passages (a stage=extract over dataset.limit_passages): run.json records it
    and the report notes it on the run; the run dir given twice is one run."""
    from gear_repro.cli.report import main as report_main

    rows = [json.loads(x) for x in (toy_dir / "triples.jsonl").read_text().splitlines()]
    (toy_dir / "partial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["passage_id"] == "0"))
    run = tmp_path / "runs" / "r"
    Runner(_cfg(compose, toy_dir, "dataset.triples_file=partial.jsonl"), run).run()
    assert json.loads((run / "run.json").read_text())["data_warnings"] == {"passages_without_triples": 5}
    assert report_main([str(tmp_path / "runs"), str(run), "--out", str(tmp_path / "rep")]) == 0
    err = capsys.readouterr().err
    assert err.count("5 passages of its corpus have no triple (a partial triples file") == 1
    Runner(_cfg(compose, toy_dir), tmp_path / "full").run()
    assert json.loads((tmp_path / "full" / "run.json").read_text())["data_warnings"] == {}


def test_an_index_or_extract_stage_never_writes_over_another_run(compose, toy_dir, tmp_path):
    """stage=index / stage=extract into a retrieve run's dir overwrote its metrics.json, run.json and config.yaml
    unchecked (the report then tabled the BM25 numbers under the extraction's config): every stage checks the dir.
    An index build into the dir of another config's index build is refused as a resume is."""
    from gear_repro.data import load_dataset
    from gear_repro.pipeline.resources import Resources
    from gear_repro.utils.lock import RunDirInUse
    from tests.helpers.doubles import ExtractionLLM

    run = tmp_path / "bm25"
    metrics = Runner(_cfg(compose, toy_dir), run).run()
    before = {f: (run / f).read_bytes() for f in ("metrics.json", "run.json", "config.yaml")}
    with pytest.raises(RunDirInUse, match=r"holds a stage=retrieve run; a stage=index run into it would overwrite"):
        Runner(_cfg(compose, toy_dir, "stage=index"), run).run()
    cfg = _cfg(compose, toy_dir, "stage=extract", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1")
    with pytest.raises(RunDirInUse, match=r"holds a stage=retrieve run; a stage=extract run into it"):
        Runner(cfg, run, resources=Resources(cfg, llm=ExtractionLLM(load_dataset(toy_dir).passages))).run()
    assert {f: (run / f).read_bytes() for f in before} == before and not (run / "failure.json").exists()
    assert json.loads((run / "metrics.json").read_text())["recall@5"] == metrics["recall@5"]
    index = tmp_path / "index"
    assert Runner(_cfg(compose, toy_dir, "stage=index"), index).run()["passages"] == 6
    assert Runner(_cfg(compose, toy_dir, "stage=index"), index).run()["passages"] == 6  # the same build again
    with pytest.raises(ConfigError, match=r"holds an index build of a different config .*backend.bm25.k1: 1.2 → 0.9"):
        Runner(_cfg(compose, toy_dir, "stage=index", "backend.bm25.k1=0.9"), index).run()
    with pytest.raises(RunDirInUse, match=r"holds a stage=index run; a stage=retrieve run"):
        Runner(_cfg(compose, toy_dir), index).run()


def _contend(run_dir: str, start, out) -> None:
    """One contender for a stale lock (a child process): waits for the others, tries the lock, holds it a while."""
    import logging

    from gear_repro.utils.lock import RunDirInUse, RunDirLock

    logging.disable(logging.WARNING)
    start.wait()
    lock = RunDirLock(run_dir)
    try:
        lock.acquire()
    except RunDirInUse:
        out.put(0)
        return
    out.put(1)
    import time

    time.sleep(0.3)  # held while the others try
    lock.release()


def test_a_stale_lock_is_taken_over_by_one_process_only(tmp_path):
    """Two processes that both found a lock stale could both take it over (one deleted the lock the other had just
    created: 6 of 40 trials held twice); the takeover now runs under a flock, so exactly one holds it each time."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    dead = 2**22 + 17  # above pid_max's default: no such process
    holders = []
    for trial in range(12):
        run_dir = tmp_path / f"t{trial}"
        run_dir.mkdir()
        (run_dir / ".lock").write_text(json.dumps({"host": __import__("socket").gethostname(), "pid": dead,
                                                   "start": "1"}))
        start, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_contend, args=(str(run_dir), start, out)) for _ in range(6)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(30)
        holders.append(sum(out.get(timeout=5) for _ in procs))
    assert holders == [1] * 12
