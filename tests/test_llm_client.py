"""LLM client against a fake OpenAI-compatible endpoint on 127.0.0.1 (stdlib http.server in a thread):
cache hit/miss and replay, ledger, retries on 429/500/timeouts/malformed bodies, bounded retries,
concurrency, and the API key never reaching logs, ledger, cache files, stats or config dumps."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from gear_repro.config import group_config
from gear_repro.llm import LLMCallError, LLMClient, TokenLedger
from gear_repro.llm.cache import LLMCache
from gear_repro.llm.ledger import tags
from gear_repro.utils.errors import ConfigError

SECRET = "sk-test-SECRET-7f3a9c0e5b"
KEY_ENV = "GEAR_TEST_FAKE_KEY"
REPO = Path(__file__).resolve().parent.parent


class FakeOpenAI:
    """Scripted endpoint: each request pops the next action (default: a normal completion)."""

    def __init__(self) -> None:
        self.actions: list[tuple] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.release = threading.Event()  # set on close: ends every "hang" action
        self.two_in_flight = threading.Event()  # set once two requests are served at the same time
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append({"auth": self.headers.get("Authorization"), "body": body, "path": self.path})
                    action = fake.actions.pop(0) if fake.actions else ("ok",)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                    if fake.in_flight >= 2:
                        fake.two_in_flight.set()
                try:
                    kind = action[0]
                    if kind == "status":
                        self._send(action[1], json.dumps({"error": {"message": f"fake {action[1]}"}}).encode(),
                                   headers=action[2] if len(action) > 2 else None)
                    elif kind == "hang":  # no reply until the test ends: the client must time out
                        fake.release.wait()
                    elif kind == "together":  # reply only once another request is in flight (or after 30 s)
                        fake.two_in_flight.wait(30)
                        self._send(200, fake.completion(body))
                    elif kind == "malformed":
                        self._send(200, action[1], ctype=action[2] if len(action) > 2 else "application/json")
                    elif kind == "no_usage":
                        self._send(200, fake.completion(body, usage=False))
                    else:
                        self._send(200, fake.completion(body))
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @staticmethod
    def completion(body: dict, usage: bool = True) -> bytes:
        last = body["messages"][-1]["content"]
        out: dict[str, Any] = {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"echo: {last}"}}],
        }
        if usage:
            out["usage"] = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
        return json.dumps(out).encode()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    f = FakeOpenAI()
    yield f
    f.close()


@pytest.fixture
def make_client(fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    clients: list[LLMClient] = []

    def make(**kw: Any) -> LLMClient:
        args = dict(model="fake-model", base_url=fake.url, api_key_env=KEY_ENV, timeout_s=1.0, max_retries=3,
                    backoff_base_s=0.01, backoff_max_s=0.05, cache_dir=str(tmp_path / "llm_cache"))
        args.update(kw)
        c = LLMClient(**args)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def msgs(text: str = "hello") -> list[dict]:
    return [{"role": "user", "content": text}]


def test_cache_miss_then_hit_and_deterministic_replay(fake: FakeOpenAI, make_client) -> None:
    c = make_client()
    r1 = c.chat(msgs(), stage="read")
    r2 = c.chat(msgs(), stage="read")
    assert len(fake.requests) == 1
    assert (r1.cached, r2.cached) == (False, True)
    assert r1.text == r2.text == "echo: hello"
    assert (r2.prompt_tokens, r2.completion_tokens, r2.model) == (11, 5, "fake-model")
    c.chat(msgs(), stage="read", max_tokens=7)  # different params -> different key
    assert len(fake.requests) == 2 and fake.requests[1]["body"]["max_tokens"] == 7
    assert fake.requests[0]["body"]["temperature"] == 0.0
    # a new client (a re-run) on the same endpoint replays from the persistent cache without a request
    c2 = make_client()
    r3 = c2.chat(msgs(), stage="read")
    assert r3.cached and r3.text == r1.text and c2.stats()["cache_hits"] == 1 and len(fake.requests) == 2
    assert c.stats() | {} == {"calls": 3, "cache_hits": 1, "cache_misses": 2, "retries": 0, "failures": 0, "echoed": 0, "truncated": 0,
                              "prompt_tokens": 33, "completion_tokens": 15, "cache_hit_rate": 0.3333,
                              "endpoint": fake.url, "cache_mode": "wal"}


def test_cache_disabled(fake: FakeOpenAI, make_client) -> None:
    c = make_client(cache=False)
    c.chat(msgs(), stage="qa")
    c.chat(msgs(), stage="qa")
    assert len(fake.requests) == 2


def test_ledger_records_and_slices(fake: FakeOpenAI, make_client) -> None:
    ledger = TokenLedger()
    c = make_client(ledger=ledger)
    assert c.ledger is ledger
    c.chat(msgs("a"), stage="read")
    mark = ledger.mark()
    with tags(round=1):  # the round of the method's loop
        c.chat(msgs("b"), stage="gist")
        c.chat(msgs("b"), stage="gist")
    recs = ledger.since(mark)
    assert [(r["stage"], r["round"], r["cached"]) for r in recs] == [("gist", 1, False), ("gist", 1, True)]
    assert all(r["prompt_tokens"] == 11 and r["completion_tokens"] == 5 and r["model"] == "fake-model"
               and r["tokens_source"] == "usage" and r["latency_s"] >= 0 and r["ok"] for r in recs)
    tot = ledger.totals()
    assert tot["calls"] == 3 and tot["cached"] == 1 and tot["billed_prompt_tokens"] == 22
    assert tot["by_stage"]["gist"]["calls"] == 2
    json.dumps(ledger.records)  # JSON-ready


def test_record_prompts_keeps_messages_and_reply_in_the_ledger(fake: FakeOpenAI, make_client) -> None:
    plain, recording = make_client(record_prompts=False), make_client(record_prompts=True, cache=False)
    plain.chat(msgs("a"), stage="read")
    recording.chat(msgs("b"), stage="read")
    fake.actions.append(("status", 400))
    with pytest.raises(LLMCallError):
        recording.chat(msgs("c"), stage="qa")
    (p,), (ok, failed) = plain.ledger.records, recording.ledger.records
    assert "messages" not in p and "reply" not in p  # off: predictions.jsonl stays small
    assert ok["messages"] == msgs("b") and ok["reply"] == "echo: b"
    assert failed["messages"] == msgs("c") and failed["reply"] is None and not failed["ok"]


def test_retries_429_and_500_then_success(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("status", 429, {"Retry-After": "0"}), ("status", 500), ("status", 503)]
    c = make_client()
    r = c.chat(msgs(), stage="read")
    assert r.text == "echo: hello" and len(fake.requests) == 4
    assert c.stats()["retries"] == 3 and c.stats()["failures"] == 0


def test_retries_are_bounded(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("status", 500)] * 10
    c = make_client(max_retries=2)
    with pytest.raises(LLMCallError, match="retries exhausted after 3 attempt"), tags(round=2):
        c.chat(msgs(), stage="read")  # a failed call is recorded under the caller's round too
    assert len(fake.requests) == 3
    s = c.stats()
    assert (s["retries"], s["failures"], s["cache_hits"]) == (2, 1, 0)
    rec = c.ledger.records[-1]
    assert rec["ok"] is False and rec["stage"] == "read" and rec["round"] == 2 and rec["prompt_tokens"] == 0
    # failures are not cached: the next call goes to the endpoint again
    fake.actions.clear()
    c.chat(msgs(), stage="read")
    assert len(fake.requests) == 4


def test_non_retryable_error_fails_at_once(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("status", 400)]
    c = make_client()
    with pytest.raises(LLMCallError, match="non-retryable"):
        c.chat(msgs(), stage="qa")
    assert len(fake.requests) == 1 and c.stats()["retries"] == 0


def test_slow_response_times_out_then_retries(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("hang",)]
    c = make_client(timeout_s=2.0)
    r = c.chat(msgs(), stage="read")
    assert r.text == "echo: hello" and c.stats()["retries"] == 1 and len(fake.requests) == 2
    # the first request is never answered before the test ends: the reply came from the retry


@pytest.mark.parametrize("body,ctype", [
    (b"<html>502 Bad Gateway</html>", "text/html"),
    (b'{"choices": [', "application/json"),
    (b'{"object": "error"}', "application/json"),
    (b'{"choices": []}', "application/json"),
])
def test_malformed_bodies_are_retried(fake: FakeOpenAI, make_client, body: bytes, ctype: str) -> None:
    fake.actions = [("malformed", body, ctype)]
    c = make_client()
    r = c.chat(msgs(), stage="read")
    assert r.text == "echo: hello" and c.stats()["retries"] == 1 and len(fake.requests) == 2


def test_malformed_forever_raises(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("malformed", b"not json at all", "text/plain")] * 5
    c = make_client(max_retries=1)
    with pytest.raises(LLMCallError):
        c.chat(msgs(), stage="read")
    assert len(fake.requests) == 2


def test_connection_refused_is_retried_and_bounded(make_client) -> None:
    c = make_client(base_url="http://127.0.0.1:9/v1", max_retries=2)
    with pytest.raises(LLMCallError, match="APIConnectionError"):
        c.chat(msgs(), stage="read")
    assert c.stats()["retries"] == 2


def test_tokens_counted_when_usage_absent(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("no_usage",)]
    c = make_client()
    r = c.chat(msgs("a question of some length"), stage="qa")
    assert r.prompt_tokens > 0 and r.completion_tokens > 0 and r.tokens_source in ("tiktoken", "estimate")
    assert c.ledger.records[-1]["tokens_source"] == r.tokens_source


def test_chat_many_concurrent_in_order(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("together",)] * 2
    c = make_client(concurrency=4, timeout_s=60)
    with tags(round=3, k=5):  # each request's thread records the caller's tags
        out = c.chat_many([msgs(f"m{i}") for i in range(8)], stage="read")
    assert [r.text for r in out] == [f"echo: m{i}" for i in range(8)]
    assert fake.max_in_flight > 1
    assert len(c.ledger.since(0)) == 8 and {(r["round"], r["k"]) for r in c.ledger.records} == {(3, 5)}


def test_chat_many_return_exceptions(fake: FakeOpenAI, make_client) -> None:
    fake.actions = [("status", 400)]
    c = make_client(concurrency=1)
    out = c.chat_many([msgs("x"), msgs("y")], stage="read", return_exceptions=True)
    assert isinstance(out[0], LLMCallError) and out[1].text == "echo: y"


def test_api_key_never_leaks(fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.setenv("OPENAI_LOG", "debug")
    caplog.set_level(logging.DEBUG)
    cfg = group_config("llm", "openai_compatible")
    cfg.base_url, cfg.model, cfg.api_key_env = fake.url, "fake-model", KEY_ENV
    cfg.cache_dir, cfg.backoff_base_s, cfg.backoff_max_s, cfg.timeout_s = str(tmp_path / "c"), 0.01, 0.02, 1.0
    c = instantiate(cfg)
    fake.actions = [("status", 429), ("ok",), ("status", 401)]
    c.chat(msgs(), stage="read")
    with pytest.raises(LLMCallError) as err:
        c.chat(msgs("other"), stage="read")
    c.chat(msgs(), stage="read")  # cache hit
    c.close()
    assert fake.requests[0]["auth"] == f"Bearer {SECRET}"  # the key was really used
    dumps = {
        "logs": caplog.text,
        "ledger": json.dumps(c.ledger.records),
        "stats": json.dumps(c.stats()),
        "config": OmegaConf.to_yaml(cfg),
        "repr": repr(c) + str(vars(c).get("server_cfg")),
        "error": str(err.value),
        "cache": b"".join(p.read_bytes() for p in (tmp_path / "c").rglob("*") if p.is_file()).decode("latin-1"),
    }
    assert caplog.text  # something was logged (retry warning, HTTP requests)
    for where, text in dumps.items():
        assert SECRET not in text, f"API key leaked into {where}"
        assert SECRET[8:] not in text, f"part of the API key leaked into {where}"


def test_key_only_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    c = LLMClient(model="gpt-4o-mini-2024-07-18", cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as e:
        c.chat(msgs(), stage="qa")
    assert "sk-" not in str(e.value)
    with pytest.raises(ConfigError, match="NAME"):
        LLMClient(model="m", api_key_env=SECRET)


def test_every_llm_config_instantiates_and_is_documented(tmp_path: Path) -> None:
    for path in sorted((REPO / "configs" / "llm").glob("*.yaml")):
        cfg = group_config("llm", path.stem)
        cfg.cache_dir = str(tmp_path)
        c = instantiate(cfg)
        assert isinstance(c, LLMClient) and c.default_params["temperature"] == 0.0
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#") and not line.strip().endswith(":") \
                    and not line.startswith("_target_"):
                assert "#" in line, f"{path.name}: undocumented field: {line}"
    local = group_config("llm", "local")
    assert local.server.n_threads == 2 and local.server.n_ctx == 8192 and local.temperature == 0.0
    assert group_config("llm", "openai").model == "gpt-4o-mini-2024-07-18"


_WRITER = """
import sys
from gear_repro.llm.cache import LLMCache
c = LLMCache(sys.argv[1])
for i in range(int(sys.argv[3])):
    c.put(f"{sys.argv[2]}-{i}", "m", {"text": str(i)})
"""


def test_cache_safe_under_concurrent_processes(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), f"p{j}", "150"]) for j in range(3)]
    assert all(p.wait(timeout=180) == 0 for p in procs)
    cache = LLMCache(tmp_path)
    assert len(cache) == 450 and cache.get("p2-149") == {"text": "149"}


def test_a_query_string_in_base_url_goes_with_every_request_after_the_route(make_client, fake) -> None:
    """``llm.base_url=https://host/v1?key=...`` (an endpoint authenticated by a query parameter): the SDK appends the
    route to the base URL as text, so the query is split off and sent as the client's default query."""
    c = make_client(base_url=fake.url + "?key=S3KRETQ&api-version=2024-06-01", cache=False)
    assert c.chat(msgs(), stage="qa").text
    assert fake.requests[0]["path"] == "/v1/chat/completions?key=S3KRETQ&api-version=2024-06-01"
    assert "S3KRETQ" not in repr(c) and "S3KRETQ" not in str(c.endpoint)


def test_request_params_are_checked_against_the_chat_api_at_start_up(make_client) -> None:
    from gear_repro.utils.errors import ConfigError

    c = make_client()
    c.check_params({"max_tokens": 64, "seed": 1, "stop": ["\n"], "extra_body": {"top_k": 1}}, "qa_reader.llm_params")
    with pytest.raises(ConfigError, match=r"qa_reader\.llm_params\.bogus_param is not a parameter of the chat "
                                          r"completions API \(openai [0-9.]+: audio, .*max_tokens"):
        c.check_params({"bogus_param": 1}, "qa_reader.llm_params")
    with pytest.raises(ConfigError, match=r"llm\.params\.stream must be false"):
        c.check_params({"stream": True}, "llm.params")


@pytest.mark.parametrize("params, warned", [({"temperature": 0.7}, True), ({}, False),
                                            ({"temperature": 0.7, "seed": 3}, False)])
def test_a_sampled_request_answered_from_the_cache_is_warned_about(fake: FakeOpenAI, make_client, caplog,
                                                                    params: dict, warned: bool) -> None:
    """``llm.temperature=0.7``: a re-run (or a repeated call) got the first sample back from the reply cache without a
    word, so runs meant to measure sampling spread gave one number; temperature 0 or a seed: none."""
    c = make_client()
    with caplog.at_level(logging.WARNING, logger="gear_repro.llm.client"):
        first = c.chat(msgs(), stage="qa", **params)
        again = c.chat(msgs(), stage="qa", **params)
        c.chat(msgs(), stage="qa", **params)
    assert again.cached and again.text == first.text and len(fake.requests) == 1
    hits = [r for r in caplog.records if "no new draws" in r.getMessage()]
    assert len(hits) == (1 if warned else 0)  # once per client
