"""``run.workers`` (questions in flight) against a stand-in endpoint: the records and their order equal
``workers=1`` although requests finish out of order; ``llm.concurrency`` caps the requests in flight; each
record keeps its own question's LLM calls (ledger.call_scope)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from gear_repro.config import validate
from gear_repro.llm.ledger import TokenLedger, call_scope
from gear_repro.llm.standin import StandInServer
from gear_repro.run_resources import Resources
from gear_repro.runner import Runner
from gear_repro.utils.concurrency import COMPUTE
from gear_repro.utils.errors import ConfigError
from tests.conftest import TOY_QUESTIONS, write_jsonl

def _is_timing(key: str) -> bool:
    return key in ("timings", "ts") or key.endswith(("_ms", "_s"))


def _strip(obj):
    """A record without its timing fields (they differ between any two runs)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not _is_timing(k)}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _run(compose, data: Path, out: Path, url: str, workers: int, concurrency: int) -> list[dict]:
    cfg = validate(compose([
        "agent=ircot", "retriever=bm25", "embedder=minilm", f"dataset.path={data}", "dataset.name=toy",
        "run.progress=false", "agent.top_k=2", "qa=true", "llm=openai_compatible", f"llm.base_url={url}",
        "llm.model=standin", f"llm.cache_dir={out / 'llm_cache'}", f"run.workers={workers}",
        f"llm.concurrency={concurrency}"]))
    res = Resources(cfg)
    res.__dict__["embedder"] = None  # IRCoT (BM25) needs no vectors
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
    assert 2 <= server.max_in_flight <= 2  # questions overlapped, and never more than llm.concurrency requests
    assert [r["id"] for r in parallel] == [f"{q['id']}-{i}" for i in range(4) for q in TOY_QUESTIONS]
    assert _strip(parallel) == _strip(serial)  # rankings, answers, traces, and each question's own calls
    assert all(sum(c["stage"] == "qa" for c in r["llm_calls"]) == 1 for r in parallel)
    assert server.n_requests == one_at_a_time.n_requests == sum(len(r["llm_calls"]) for r in serial)


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
    cfg = validate(compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25",
                            "run.workers=0"]))
    with pytest.raises(ConfigError, match="run.workers"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
