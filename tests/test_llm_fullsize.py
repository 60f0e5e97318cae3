"""The LLM stages at full size (docs/llm.md, "LLM stages at full size"): the real client on a seeded 429/500/slow
schedule loses no call, a SIGKILLed extraction resumes without re-sending a finished prompt, and the cost/time
estimate said before the first call has the numbers of the prompts it will send."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gear_repro.data.dataset import load_dataset
from gear_repro.extraction import extract_triples
from gear_repro.extraction.extract import extraction_estimate, reference_reply
from gear_repro.llm import LLMClient, tokens
from gear_repro.llm.cache import request_key
from gear_repro.llm.estimate import EstimateSettings, announce, estimate_calls
from gear_repro.llm.prices import price_for_model
from gear_repro.prompts import render
from gear_repro.types import Passage, Triple
from gear_repro.utils.errors import ConfigError
from tests.helpers.standin_server import Faults, StandInServer, prompt_digest, standin_reply

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "musique_sample"
MODEL = "gpt-4o-mini-2024-07-18"


def _client(url: str, tmp_path: Path, **kw) -> LLMClient:
    args = dict(model=MODEL, base_url=url, api_key_env="GEAR_TEST_NO_KEY", cache_dir=str(tmp_path / "llm_cache"),
                max_tokens=1024)
    return LLMClient(**(args | kw))


def test_fault_schedule_costs_retries_not_calls(tmp_path: Path) -> None:
    """40 extraction prompts at concurrency 4 on a schedule of 429s (Retry-After 10 ms), 500s and slow replies: every
    prompt is answered exactly once with a 200, the client's retries equal the faults the schedule gives these
    prompts (worked out from ``Faults.draw`` alone), no failure."""
    faults = Faults(p429=0.25, p500=0.05, p_slow=0.05, slow_s=0.05, retry_after_s=0.01, seed=3)
    passages = load_dataset(str(SAMPLE)).passages[:40]
    batch = [render("extraction", wiki_title=p.title, passage=p.text) for p in passages]
    expected = {"429": 0, "500": 0, "slow": 0}
    for msgs in batch:
        attempt, d = 0, prompt_digest(msgs[-1]["content"])
        while (kind := faults.draw(d, attempt)) in ("429", "500"):
            expected[kind] += 1
            attempt += 1
        expected["slow"] += kind == "slow"
        assert attempt <= 4  # within max_retries=4 for this seed: the schedule itself loses nothing
    assert expected["429"] >= 8 and expected["500"] >= 1  # the seed does exercise both
    with StandInServer(latency_s=0.0, reply=standin_reply, faults=faults) as server, \
            _client(server.url, tmp_path, concurrency=4) as c:
        replies = c.chat_many(batch, stage="extract")
        assert server.status == {"200": 40, **{k: v for k, v in expected.items() if v}}
        assert c.stats()["retries"] == expected["429"] + expected["500"]
        assert c.stats()["failures"] == 0 and c.stats()["cache_misses"] == 40
        assert sorted(server.served.values()) == [1] * 40
        assert all(json.loads(r.text)["triples"] for r in replies)  # K.1 replies the extraction parses


def test_sigkilled_extraction_resumes_without_resending_a_finished_prompt(tmp_path: Path) -> None:
    """The extraction CLI is SIGKILLed mid-run; the same command then finishes the corpus, and the endpoint sees no
    request after the kill for a prompt whose reply was in the cache at the kill (those not yet logged are answered
    from the cache); every passage ends with its triples once."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    n = 160
    with StandInServer(latency_s=0.04, reply=standin_reply) as server:
        cmd = [sys.executable, "-m", "gear_repro.extraction", "--dataset", str(SAMPLE), "--llm", "openai_compatible",
               "--limit", str(n), "--out", str(out), "--set", f"base_url={server.url}", f"model={MODEL}",
               f"cache_dir={cache}", "concurrency=4"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = out / "extraction_log.jsonl"
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and \
                (not log.exists() or len(log.read_text().splitlines()) < 40):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        while server.in_flight:  # requests of the killed client still being answered count as before the kill
            time.sleep(0.01)
        time.sleep(0.1)
        import sqlite3

        with sqlite3.connect(cache / "cache.sqlite3") as con:
            keys = {k for (k,) in con.execute("SELECT key FROM replies")}
        logged = len(log.read_text().splitlines())
        assert 40 <= logged < n and len(keys) >= logged  # killed mid-run, after its first 40 passages
        before = dict(server.served)
        subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    passages = load_dataset(str(SAMPLE)).passages[:n]
    endpoint = _client(server.url, tmp_path).endpoint
    cached = [prompt_digest(m[-1]["content"]) for m in
              (render("extraction", wiki_title=p.title, passage=p.text) for p in passages)
              if request_key(MODEL, m, {"temperature": 0.0, "max_tokens": 1024}, endpoint) in keys]
    assert len(cached) == len(keys)
    assert sum(server.served[d] - before.get(d, 0) for d in cached) == 0
    lost = sum(before.values()) - len(keys)  # answered while the client was being killed: never cached
    assert 0 <= lost <= 4 and sum(server.served.values()) == n + lost  # otherwise each prompt answered once
    stats = json.loads((out / "extraction_stats.json").read_text())
    assert stats["n_done"] == n and stats["llm_stats"]["cache_hits"] == len(keys) - logged
    ids = [json.loads(x)["passage_id"] for x in log.read_text().splitlines()]
    assert sorted(ids, key=int) == [p.id for p in passages]


PASSAGES = [Passage(id="a", title="Amiens", text="Amiens lies on the Somme in France."),
            Passage(id="b", title="Paris", text="Paris is the capital of France."),
            Passage(id="c", title="Somme", text="The Somme flows into the English Channel.")]
REFERENCE = [Triple(id="a-0", subject="Amiens", predicate="lies on", object="Somme", passage_id="a"),
             Triple(id="a-1", subject="Amiens", predicate="country", object="France", passage_id="a")]


@pytest.fixture
def chars_per_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Token counts by the offline rule (ceil(chars / 4)), whether or not tiktoken's encoding loads here."""
    monkeypatch.setattr(tokens, "_encoding", lambda model: None)


def test_extraction_estimate_counts_the_prompts_it_will_send(tmp_path: Path, chars_per_token: None) -> None:
    """3 passages, one already in the reply cache: 2 calls to send; input tokens are those of the 2 K.1 prompts
    (3 + ceil(chars/4) + 3 each), output tokens the reference triples of passage a written as a K.1 reply, $ at
    gpt-4o-mini's $0.15 / $0.60 per 1M tokens, time = 2 calls x 1.5 s / 2 workers."""
    prompts = [render("extraction", wiki_title=p.title, passage=p.text) for p in PASSAGES]
    reply = '{"named_entities": ["Amiens", "Somme", "France"], "triples": [["Amiens", "lies on", "Somme"], ' \
            '["Amiens", "country", "France"]]}'
    assert reference_reply(REFERENCE) == reply
    with _client("http://127.0.0.1:9/v1", tmp_path, check_endpoint=False) as c:
        c.cache.put(request_key(MODEL, prompts[1], c._params({}), c.endpoint), MODEL, {"text": "x"})
        est = extraction_estimate(PASSAGES, c, {}, 2, REFERENCE, EstimateSettings(latency_s=1.5))
    pt = sum(6 + math.ceil(len(prompts[i][0]["content"]) / 4) for i in (0, 2))
    ct = 2 * math.ceil(len(reply) / 4)
    assert (est.calls, est.cached, est.uncached) == (3, 1, 2)
    assert (est.prompt_tokens, est.completion_tokens) == (pt, ct) == (1275, 64)
    assert est.usd == pytest.approx((pt * 0.15 + ct * 0.60) / 1e6)
    assert est.wall_s == pytest.approx(1.5) and est.price_model == "gpt-4o-mini"
    assert "1 passages as K.1 replies" in est.output_source and "4 characters per token" in est.tokens_source


def test_estimate_is_logged_before_the_first_call_and_warns_on_a_large_run(tmp_path: Path, chars_per_token: None,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The extraction logs its estimate while the endpoint has seen no request; past llm.estimate_warn_usd it is a
    WARNING naming the knob, and the run goes on without asking (no stdin: CI and batch jobs)."""
    seen: list[int] = []
    with StandInServer(latency_s=0.0, reply=standin_reply, usage="tokens") as server, \
            _client(server.url, tmp_path, estimate_warn_usd=0.0) as c:

        class Snapshot(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "extraction estimate" in record.getMessage():
                    seen.append(server.n_requests)

        handler = Snapshot()
        logging.getLogger("gear_repro.extraction.extract").addHandler(handler)
        try:
            with caplog.at_level(logging.INFO, logger="gear_repro"):
                stats = extract_triples(PASSAGES, c, tmp_path / "out", reference=REFERENCE, progress=False)
        finally:
            logging.getLogger("gear_repro.extraction.extract").removeHandler(handler)
    assert seen[0] == 0 and stats["n_done"] == 3
    warn = [r for r in caplog.records if r.levelno == logging.WARNING and "LARGE LLM RUN" in r.getMessage()]
    assert len(warn) == 1 and "llm.estimate_warn_usd=0" in warn[0].getMessage()
    est = stats["estimate"]
    actual_pt = sum(r["prompt_tokens"] for r in json.loads(f"[{','.join((tmp_path / 'out' / 'extraction_log.jsonl').read_text().splitlines())}]"))
    assert est["calls"] == 3 and est["prompt_tokens"] == actual_pt  # the stand-in counts with the same rule


def test_estimate_without_a_list_price_and_under_the_thresholds_is_one_info_line(
        caplog: pytest.LogCaptureFixture) -> None:
    est = estimate_calls([[{"role": "user", "content": "x" * 400}]] * 10, stage="qa", model="meta-llama/Llama-3.1-8B",
                         concurrency=4, settings=EstimateSettings(latency_s=2.0, output_tokens=50))
    assert (est.prompt_tokens, est.completion_tokens, est.usd, est.wall_s) == (10 * (3 + 100 + 3), 500, None, 5.0)
    with caplog.at_level(logging.INFO, logger="gear_repro"):
        assert announce(est, EstimateSettings()) is False
    assert caplog.records[-1].levelno == logging.INFO and "no list price for meta-llama" in caplog.records[-1].message
    assert announce(est, EstimateSettings(warn_s=4.0)) is True  # 5 s > 4 s: large by time alone


def test_served_model_names_find_their_list_price() -> None:
    assert price_for_model("gpt-4o-mini-2024-07-18")["input"] == 0.15
    assert price_for_model("gpt-3.5-turbo-1106")["output"] == 2.00
    assert price_for_model("gpt-4o-minimal") is None and price_for_model("qwen") is None


def test_estimate_knobs_are_range_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="llm.estimate_latency_s must be > 0"):
        _client("http://127.0.0.1:9/v1", tmp_path, estimate_latency_s=0)
    with pytest.raises(ConfigError, match="llm.estimate_warn_usd must be >= 0"):
        _client("http://127.0.0.1:9/v1", tmp_path, estimate_warn_usd=-1)
    from gear_repro.config import group_config

    cfg = group_config("llm", "openai")
    assert (cfg.estimate_latency_s, cfg.estimate_output_tokens, cfg.estimate_warn_usd, cfg.estimate_warn_s) == \
        (2.0, 200, 5.0, 3600.0)


def test_a_question_run_says_its_estimate_before_the_first_call(compose, toy_dir, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """IRCoT (BM25) with QA on the 3 toy questions through the runner: the estimate is logged while the endpoint has
    seen no request; its calls are the plan's upper bound (a CoT step after each round but the last, max_rounds - 1,
    and 1 QA call a question), at least
    the calls the run then made; its input tokens those of the real templates (K.3 QA, IRCoT) it rendered."""
    from gear_repro.config import validate
    from gear_repro.pipeline.estimate import question_plan
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from tests.helpers.doubles import template_reply

    seen: list[int] = []
    with StandInServer(latency_s=0.0, reply=lambda p: template_reply(p, 1, ["Amiens"]) or "Answer: Amiens") as server:
        cfg = validate(compose([
            "agent=ircot", "retriever=bm25", "agent.top_k=2", "qa=true", "dataset.max_rounds=3", "embedder=minilm",
            f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "llm=openai_compatible",
            f"llm.base_url={server.url}", f"llm.model={MODEL}", f"llm.cache_dir={tmp_path / 'cache'}"]))
        assert question_plan(cfg) == [("ircot", 2, 2), ("qa", 1, 5)]

        class Snapshot(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "questions estimate" in record.getMessage():
                    seen.append(server.n_requests)

        handler = Snapshot()
        logging.getLogger("gear_repro.pipeline.estimate").addHandler(handler)
        try:
            with caplog.at_level(logging.INFO, logger="gear_repro"):
                Runner(cfg, tmp_path / "run", resources=Resources(cfg, embedder=None)).run()
        finally:
            logging.getLogger("gear_repro.pipeline.estimate").removeHandler(handler)
        made = server.n_requests
    assert seen == [0]
    line = next(r.getMessage() for r in caplog.records if "questions estimate" in r.getMessage())
    assert "9 LLM calls to send" in line and "at most 3 calls a question: 2 ircot, 1 qa" in line
    assert 3 * 2 <= made <= 9  # each question: 1 or 2 CoT steps and its QA call


def test_a_passage_costs_two_fsyncs_whatever_its_triples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each extracted passage is made durable with one fsync for its triples and one for its log line (before: one
    per triple, ~10 a passage at ~3 ms each, which held the extraction near 30 passages/s whatever
    llm.concurrency); the triples are all there."""
    import gear_repro.utils.io as io

    synced: list[str] = []
    real = io.os.fsync
    monkeypatch.setattr(io.os, "fsync", lambda fd: (synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name),
                                                   real(fd))[1])
    passages = load_dataset(str(SAMPLE)).passages[:5]
    with StandInServer(latency_s=0.0, reply=standin_reply) as server, _client(server.url, tmp_path) as c:
        stats = extract_triples(passages, c, tmp_path / "out", progress=False)
    per_passage = [r["n_triples"] for r in map(json.loads, (tmp_path / "out" / "extraction_log.jsonl").read_text().splitlines())]
    assert stats["triples"] == sum(per_passage) > 2 * len(passages)  # several triples a passage
    assert synced.count("triples.jsonl") == synced.count("extraction_log.jsonl") == len(passages)
