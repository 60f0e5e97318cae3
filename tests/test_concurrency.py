"""``run.workers`` (questions in flight) against a stand-in endpoint: the records and their order equal
``workers=1`` although requests finish out of order, for IRCoT, GEAR, SyncGE with matched-k passes and T²RAG;
``llm.concurrency`` caps the requests in flight; each record keeps its own question's LLM calls
(ledger.call_scope); progress counts completions while records keep question order."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from gear_repro.config import validate
from gear_repro.llm.ledger import TokenLedger, call_scope
from gear_repro.methods.base import MethodOutput
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.runner import Runner
from gear_repro.types import Question, Ranking
from gear_repro.utils.concurrency import COMPUTE
from gear_repro.utils.errors import ConfigError
from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS, write_jsonl
from tests.helpers.doubles import template_reply
from tests.helpers.standin_server import SENTENCES, StandInServer

IRCOT = ["agent=ircot", "retriever=bm25", "agent.top_k=2", "qa=true"]
ENTITIES = [title for title, _ in TOY_PASSAGES]


def scripted_reply(prompt: str) -> str:
    """A reply in the format of the prompt's template (tests/helpers/doubles.py ``template_reply``; else a QA
    answer), entities and verdicts picked by the prompt's hash: the same prompt gets the same reply, and the
    questions take different paths (rounds, stops)."""
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    return template_reply(prompt, h, ENTITIES) or f"Answer: {ENTITIES[h % len(ENTITIES)]}"


def _is_timing(key: str) -> bool:
    return key in ("timings", "ts") or key.endswith(("_ms", "_s"))


def _strip(obj):
    """A record without its timing fields (they differ between any two runs)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not _is_timing(k)}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _run(compose, data: Path, out: Path, url: str, workers: int, concurrency: int, method: list[str] = IRCOT,
         embedder: Any = None) -> list[dict]:
    """``method`` (overrides) on ``data`` against the endpoint ``url``; ``embedder`` None for methods without
    vectors."""
    cfg = validate(compose([
        *method, "embedder=minilm", f"dataset.path={data}", "dataset.name=toy", "run.progress=false",
        "llm=openai_compatible", f"llm.base_url={url}", "llm.model=standin", f"llm.cache_dir={out / 'llm_cache'}",
        f"run.workers={workers}", f"llm.concurrency={concurrency}"]))
    res = Resources(cfg, embedder=embedder)
    metrics = Runner(cfg, out / "run", resources=res).run()
    assert metrics["n_errors"] == 0
    return [json.loads(x) for x in (out / "run" / "predictions.jsonl").read_text().splitlines()]


def _twelve(toy_dir: Path, same_text: bool) -> Path:
    """The toy corpus with 12 questions: the 3 toy questions 4 times, under other ids, with distinct texts
    (a suffix outside the corpus vocabulary) unless ``same_text``."""
    write_jsonl(toy_dir / "questions.jsonl", [
        q | {"id": f"{q['id']}-{i}", "question": q["question"] if same_text else f"{q['question']} ({i})"}
        for i in range(4) for q in TOY_QUESTIONS])
    return toy_dir


def test_workers_give_the_records_of_one_worker_in_question_order(compose, toy_dir, tmp_path) -> None:
    data = _twelve(toy_dir, same_text=False)
    with StandInServer(latency_s=0.05, jitter_s=0.1, seed=1) as one_at_a_time:
        serial = _run(compose, data, tmp_path / "w1", one_at_a_time.url, workers=1, concurrency=1)
    with StandInServer(latency_s=0.05, jitter_s=0.1, seed=2) as server:
        parallel = _run(compose, data, tmp_path / "w4", server.url, workers=4, concurrency=2)
    assert one_at_a_time.max_in_flight == 1
    assert server.max_in_flight == 2  # questions overlapped, and never more than llm.concurrency requests
    assert [r["id"] for r in parallel] == [f"{q['id']}-{i}" for i in range(4) for q in TOY_QUESTIONS]
    assert _strip(parallel) == _strip(serial)  # rankings, answers, traces, and each question's own calls
    assert all(sum(c["stage"] == "qa" for c in r["llm_calls"]) == 1 for r in parallel)
    assert server.n_requests == one_at_a_time.n_requests == sum(len(r["llm_calls"]) for r in serial)


def test_record_prompts_reach_predictions_and_the_explorer(compose, toy_dir, tmp_path) -> None:
    """``llm.record_prompts=true``: every call of every question keeps the prompt the server was sent and the reply
    it gave; the explorer's question view carries both."""
    from gear_repro.reporting.html.data import Column, method_detail

    with StandInServer(latency_s=0.0, seed=1) as server:
        recs = _run(compose, toy_dir, tmp_path / "rec", server.url, workers=1, concurrency=1,
                    method=[*IRCOT, "llm.record_prompts=true"])
    calls = [c for r in recs for c in r["llm_calls"]]
    assert len(calls) == server.n_requests > 0
    for c in calls:
        assert c["messages"][-1]["role"] == "user" and c["reply"] in SENTENCES
    assert any(c["stage"] == "qa" and recs[0]["question"] in c["messages"][-1]["content"]
               for c in recs[0]["llm_calls"])
    shown = method_detail(Column(run=None, index=0), recs[0], depth=5)["llm_calls"]
    assert [(c["messages"], c["reply"]) for c in shown] == [(c["messages"], c["reply"]) for c in recs[0]["llm_calls"]]


def test_identical_requests_in_flight_are_sent_once(compose, toy_dir, tmp_path) -> None:
    """Single flight: questions with the same text ask the same prompts; with 4 in flight each prompt still reaches
    the endpoint once and the others take its reply from the cache, as they do one at a time."""
    data = _twelve(toy_dir, same_text=True)
    with StandInServer(latency_s=0.05, jitter_s=0.1, seed=1) as one_at_a_time:
        serial = _run(compose, data, tmp_path / "w1", one_at_a_time.url, workers=1, concurrency=1)
    with StandInServer(latency_s=0.05, jitter_s=0.1, seed=2) as server:
        parallel = _run(compose, data, tmp_path / "w4", server.url, workers=4, concurrency=4)
    assert server.n_requests == one_at_a_time.n_requests == sum(not c["cached"] for r in serial for c in r["llm_calls"])
    assert sum(not c["cached"] for r in parallel for c in r["llm_calls"]) == server.n_requests
    strip_cached = [{**r, "llm_calls": [{k: v for k, v in c.items() if k != "cached"} for c in r["llm_calls"]]}
                    for r in (*serial, *parallel)]
    assert _strip(strip_cached[:12]) == _strip(strip_cached[12:])  # which duplicate paid is the only difference


@pytest.fixture(scope="module")
def minilm() -> Any:
    """One MiniLM embedder for this module's runs (a text's vector does not depend on the run)."""
    from hydra.utils import instantiate

    from tests.helpers.runs import compose_config

    return instantiate(compose_config(["embedder=minilm", "embedder.show_progress=false"]).embedder)


@pytest.mark.parametrize("method", [
    ["agent=gear", "retriever=bm25", "beam.scorer=sum"],
    ["agent=single", "expansion=sync", "retriever=bm25", "beam.scorer=sum", "qa=true"],  # a pass per k (matched-k)
    ["agent=t2rag"],
], ids=["gear", "syncge-matched-k", "t2rag"])
@pytest.mark.slow
def test_llm_methods_give_the_records_of_one_worker(method, compose, toy_dir, tmp_path, minilm) -> None:
    """Shared objects (expansion, scorer memos, retrievers, embedder LRU) and per-question state stay apart:
    every record, its LLM calls and their matched-k tags equal ``workers=1``'s, in question order."""
    data = _twelve(toy_dir, same_text=False)
    runs: dict[int, list[dict]] = {}
    for workers, concurrency in ((1, 1), (4, 2)):
        with StandInServer(latency_s=0.01, jitter_s=0.05, seed=workers, reply=scripted_reply) as server:
            runs[workers] = _run(compose, data, tmp_path / f"w{workers}", server.url, workers, concurrency, method,
                                 minilm)
        assert server.max_in_flight <= concurrency
    assert [r["id"] for r in runs[4]] == [f"{q['id']}-{i}" for i in range(4) for q in TOY_QUESTIONS]
    assert _strip(runs[4]) == _strip(runs[1])
    assert len({json.dumps(r["rankings"]) for r in runs[1]}) > 1  # the script sends questions different ways
    if "expansion=sync" in method:
        assert all([c["k"] for c in r["llm_calls"] if c["stage"] == "read"] == [5, 10, 15] for r in runs[4])


class _WaitFor:
    """A method whose first question waits (as on an LLM reply, the compute lock given up) until ``release``
    is set; question ``fail`` raises."""

    k_dependent = False

    def __init__(self, first: str, fail: str | None = None):
        self.first, self.fail, self.release = first, fail, threading.Event()

    def run(self, q: Question, k: int) -> MethodOutput:
        if q.id == self.first:
            with COMPUTE.released():
                assert self.release.wait(30)
        if q.id == self.fail:
            raise RuntimeError(f"{q.id} failed")
        return MethodOutput(ranking=Ranking([q.id], [1.0]))


def _runner(compose, toy_dir: Path, tmp_path: Path, *overrides: str) -> tuple[Runner, list[Question]]:
    cfg = validate(compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                            *overrides]))
    runner = Runner(cfg, tmp_path / "run")
    return runner, runner.res.dataset.questions


def test_progress_counts_completions_and_records_keep_question_order(compose, toy_dir, tmp_path) -> None:
    """q1 finishes only after q2 has (its completion releases q1): the bar counts q2 at once, the records still
    come q1, q2, q3."""
    runner, questions = _runner(compose, toy_dir, tmp_path)
    method = _WaitFor("q1")
    completed: list[int] = []

    def done() -> None:
        completed.append(1)
        method.release.set()

    got = []
    for rec in runner._records(questions, method, None, 2, done=done):
        got.append((rec["id"], len(completed)))
    assert [qid for qid, _ in got] == ["q1", "q2", "q3"] and got[0][1] >= 2


@pytest.mark.parametrize("workers", [1, 2])
def test_fail_fast_raises_in_question_order(workers, compose, toy_dir, tmp_path) -> None:
    """With run.fail_fast the error of q2 (finished first) comes after q1's record, as with one worker."""
    runner, questions = _runner(compose, toy_dir, tmp_path, "run.fail_fast=true")
    method = _WaitFor("q1", fail="q2")
    if workers == 1:
        method.release.set()
    got = []
    with pytest.raises(RuntimeError, match="q2 failed"):
        for rec in runner._records(questions, method, None, workers, done=method.release.set):
            got.append(rec["id"])
    assert got == ["q1"]


def test_call_scope_keeps_each_threads_calls() -> None:
    ledger = TokenLedger()
    got: dict[int, list[str]] = {}
    barrier = threading.Barrier(3)

    def work(n: int) -> None:
        with call_scope() as calls:
            for i in range(5):
                barrier.wait()  # the three threads add their records interleaved
                ledger.add(stage=f"s{n}", round=i)
        got[n] = [c["stage"] for c in calls]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {n: [f"s{n}"] * 5 for n in range(3)} and len(ledger.records) == 15


def test_compute_lock_is_given_up_only_by_its_holder() -> None:
    with COMPUTE.released():  # not held by this thread: a no-op
        pass
    with COMPUTE.hold():
        with COMPUTE.released():
            assert COMPUTE._lock.acquire(blocking=False)  # free while released ...
            COMPUTE._lock.release()
        assert not COMPUTE._lock.acquire(blocking=False)  # ... held again after


def test_workers_below_one_rejected_before_any_question(compose, toy_dir, tmp_path) -> None:
    cfg = compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                   "run.workers=0"])
    with pytest.raises(ConfigError, match="run.workers"):
        Runner(validate(cfg), tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
