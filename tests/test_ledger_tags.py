"""Ledger tags (``ledger.tags``): every LLM call recorded gets the tags active at the call (a method's ``round``,
the runner's matched ``k``), nested blocks merge and restore, and questions run by the runner's thread pool or
requests sent by ``chat_many`` keep the tags of the code that started them."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gear_repro.llm.ledger import TokenLedger, active_tags, call_scope, tags
from tests.helpers.doubles import HashEmbedder, ScriptedLLM
from tests.helpers.runs import run_with_doubles


def test_tags_nest_merge_and_restore() -> None:
    assert dict(active_tags()) == {"round": 0}  # outside every round loop: round 0
    with tags(round=2, k=5):
        with tags(round=3):
            assert dict(active_tags()) == {"round": 3, "k": 5}  # the inner value wins, the outer k stays
        assert dict(active_tags()) == {"round": 2, "k": 5}
        with pytest.raises(RuntimeError), tags(round=9):
            raise RuntimeError("a failed round")
        assert active_tags()["round"] == 2  # restored on the way out of an exception too
    assert dict(active_tags()) == {"round": 0}


def test_records_get_the_active_tags_in_a_fixed_key_order() -> None:
    ledger = TokenLedger()
    ledger.add(stage="qa", prompt_tokens=1)
    with tags(round=4, k=10):
        ledger.add(stage="read", prompt_tokens=2, reply="r")
        ledger.add(stage="gist", round=1, k=15)  # what the caller gives explicitly wins over a tag
    first, second, third = ledger.records
    assert first["round"] == 0 and "k" not in first
    assert (second["round"], second["k"]) == (4, 10)
    # ledger fields first, then the record's own extras, then the other tags (predictions.jsonl's key order)
    assert list(second)[-2:] == ["reply", "k"]
    assert (third["round"], third["k"]) == (1, 15)


def test_each_thread_keeps_its_own_tags() -> None:
    ledger = TokenLedger()
    barrier = threading.Barrier(3)
    got: dict[int, list[tuple[int, int]]] = {}

    def question(n: int) -> None:
        with call_scope() as calls, tags(k=n):
            for r in range(1, 4):
                with tags(round=r):
                    barrier.wait()  # the three threads add their records interleaved
                    ledger.add(stage="read")
        got[n] = [(c["k"], c["round"]) for c in calls]

    threads = [threading.Thread(target=question, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {n: [(n, 1), (n, 2), (n, 3)] for n in range(3)}


def test_an_executor_sees_the_tags_only_through_a_copied_context() -> None:
    ledger = TokenLedger()
    with tags(round=7), ThreadPoolExecutor(max_workers=1) as ex:
        ex.submit(ledger.add, stage="bare").result()  # a pool thread starts from an empty context
        ex.submit(contextvars.copy_context().run, ledger.add, stage="copied").result()
    assert [(r["stage"], r["round"]) for r in ledger.records] == [("bare", 0), ("copied", 7)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_runners_question_pool_keeps_the_callers_tags(workers: int, toy_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A run started inside ``tags`` tags every call of every question with them, with ``run.workers`` > 1 as
    with 1 (before, pool threads started from an empty context); the matched-k passes add their ``k``."""
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    overrides = [f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "qa=true",
                 "retriever=bm25", "expansion=sync", f"run.workers={workers}", "llm.concurrency=2"]
    with tags(session="s1"):
        records = run_with_doubles(overrides, tmp_path / "run", llm=ScriptedLLM(), embedder=HashEmbedder())
    assert records
    for rec in records:
        calls = rec["llm_calls"]
        assert {c["session"] for c in calls} == {"s1"}
        assert [(c["stage"], c["k"]) for c in calls] == [("read", 5), ("read", 10), ("read", 15), ("qa", None)]
        assert {c["round"] for c in calls} == {0}


def _rounds_of(calls: list[dict], *stages: str) -> list[int]:
    return [c["round"] for c in calls if c["stage"] in stages]


@pytest.mark.parametrize("agent", ["gear", "ircot", "hipporag", "hipporag_ircot", "t2rag"])
def test_each_method_tags_its_calls_with_their_round(agent: str, toy_dir: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The methods set ``round`` where their loop is (no round passed down): each call is recorded under the
    round whose record it belongs to; calls outside every loop (K.3 QA, T²RAG's decomposition and answer) are 0."""
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    overrides = [f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "qa=true",
                 f"agent={agent}", *(["retriever=bm25"] if agent in ("gear", "ircot") else [])]
    records = run_with_doubles(overrides, tmp_path / "run", llm=ScriptedLLM(), embedder=HashEmbedder())
    assert records and not any(r.get("error") for r in records)
    for rec in records:
        calls, n = rec["llm_calls"], len(rec["rounds"])
        assert _rounds_of(calls, "qa") == ([0] if agent != "t2rag" else [])
        if agent == "gear":
            assert set(_rounds_of(calls, "read")) == set(range(1, n + 1)) == set(_rounds_of(calls, "gist"))
            assert _rounds_of(calls, "rewrite") == sorted(_rounds_of(calls, "rewrite"))
            assert set(_rounds_of(calls, "reason", "rewrite")) <= set(range(1, n + 1))
        elif agent in ("ircot", "hipporag_ircot"):
            assert _rounds_of(calls, "cot") == [r["round"] for r in rec["rounds"] if r.get("raw_thought") is not None]
            if agent == "hipporag_ircot":
                assert _rounds_of(calls, "ner") == list(range(1, n + 1))  # one retrieval per round
        elif agent == "hipporag":
            assert _rounds_of(calls, "ner") == [1]
        else:
            assert _rounds_of(calls, "decompose", "answer") == [0, 0]
            assert _rounds_of(calls, "resolve") == [r["round"] for r in rec["rounds"] if r["status"] != "skipped"]
