"""Credentials inside a URL and header values never reach a file a run writes (config.yaml,
.hydra/*, run.log with httpx's request line, predictions, stats) nor the console; a sweep over a secret."""

from __future__ import annotations

import logging
from pathlib import Path

from gear_repro.config import redact
from gear_repro.utils.secrets import RedactingFilter, redact_text
from tests.helpers.cli import files_with, run_cli, toy_args
from tests.helpers.standin_server import StandInServer

URL_KEY = "URLPW-sentinel-5e1d"
ES_KEY = "ESPW-sentinel-77ab"
HEADER_KEY = "HDR-sentinel-0c3f"
SENTINEL = "YAML-sentinel-93b2"


def test_sentinels_reach_no_file_and_no_console(toy_dir: Path, tmp_path: Path) -> None:
    """One QA run against a stand-in endpoint whose URL carries credentials, with an ES URL with credentials and a
    bearer header: every file the run writes and its console are free of the three sentinels."""
    run = tmp_path / "run"
    with StandInServer(latency_s=0.0) as server:
        url = server.url.replace("http://", f"http://user:{URL_KEY}@")
        r = run_cli(toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=standin", f"llm.base_url={url}",
                             "llm.cache=false", f"+extraction.params.es_url=https://elastic:{ES_KEY}@es.example:9200",
                             f'+llm.params.extra_headers={{Authorization: "Bearer {HEADER_KEY}"}}',
                             f"hydra.run.dir={run}"), tmp_path)
        assert r.returncode == 0, r.stderr
        assert server.n_requests == 3  # the header reached the endpoint's request: one QA call per question
    log_text = (run / "run.log").read_text()
    assert "HTTP Request: POST http://***@127.0.0.1" in log_text  # httpx's line, redacted
    for name in ("config.yaml", ".hydra/config.yaml", ".hydra/overrides.yaml", ".hydra/hydra.yaml"):
        assert (run / name).exists(), name
    assert "Authorization: '***'" in (run / "config.yaml").read_text()
    for sentinel in (URL_KEY, ES_KEY, HEADER_KEY):
        assert files_with(tmp_path, sentinel) == [], sentinel
        assert sentinel not in r.stdout + r.stderr, sentinel


def test_sweep_over_a_secret_runs_one_job_per_value_and_says_so(toy_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    r = run_cli(["-m", *toy_args(toy_dir, f"hydra.sweep.dir={sweep}", "+extraction.params.password=pw-A-1234,pw-B-5678")],
                tmp_path)
    assert r.returncode == 0, r.stderr
    assert "extraction.params.password is swept over 2 values (not shown)" in r.stderr
    assert len(list(sweep.glob("*/metrics.json"))) == 2
    for sentinel in ("pw-A-1234", "pw-B-5678"):
        assert files_with(tmp_path, sentinel) == [] and sentinel not in r.stdout + r.stderr
    quoted = run_cli(["-m", *toy_args(toy_dir, f"hydra.sweep.dir={tmp_path / 'one'}", "+extraction.params.password='A,B'")],
                     tmp_path)
    assert quoted.returncode == 0 and len(list((tmp_path / "one").glob("*/metrics.json"))) == 1
    refused = run_cli(["-m", *toy_args(toy_dir, "+extraction.params.password=choice(A,B)")], tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].startswith(
        "error: extraction.params.password: a sweep function over a secret is not supported")


def test_redaction_rules() -> None:
    assert redact_text("GET https://u:pw@h:9200/x and http://h/y") == "GET https://***@h:9200/x and http://h/y"
    cfg = {"llm": {"base_url": "http://u:k@h/v1", "params": {"extra_headers": {"X-Api": "k", "Empty": None}}},
           "backend": {"password": "p", "url": "https://h:9200"}}
    assert redact(cfg) == {"llm": {"base_url": "http://***@h/v1", "params": {"extra_headers": {"X-Api": "***",
                                                                                               "Empty": None}}},
                           "backend": {"password": "***", "url": "https://h:9200"}}
    # a password holding an @ (urllib and httpx split the authority at its last @): masked whole
    assert redact_text("http://user:p@ss@h:8000/v1 mail a@b.c http://h/p?email=a@b") == \
        "http://***@h:8000/v1 mail a@b.c http://h/p?email=a@b"
    # Azure Functions' `?code=` key; a parameter only ending in "code" is not a secret
    assert redact_text("https://fn.net/api/x?code=FKEY1&country_code=us") == "https://fn.net/api/x?code=***&country_code=us"
    rec = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s", ("POST", "http://a:b@h/v1"),
                            None)
    assert RedactingFilter().filter(rec) and rec.getMessage() == "HTTP Request: POST http://***@h/v1"


def test_secret_query_parameters_of_a_url_are_masked(tmp_path: Path) -> None:
    """An endpoint keyed in its query string (``?key=``, ``&api-key=``; Azure- and Google-style) keeps the key out
    of config.yaml, logs, llm_stats.json's endpoint and the ES back-end's records; other parameters stay."""
    from gear_repro.llm.client import LLMClient
    from gear_repro.utils.secrets import redact_url

    assert redact_text("POST https://h/v1/chat?key=QKEY-1&api-version=2024-02-01 200") == \
        "POST https://h/v1/chat?key=***&api-version=2024-02-01 200"
    assert redact_text("u?x=1&api-key=Q2;b&access_token=Q3#f&client_secret=Q4 &sig=Q5") == \
        "u?x=1&api-key=***;b&access_token=***#f&client_secret=*** &sig=***"
    assert redact_text("keyword=1 ?keyword=2 monkey=3") == "keyword=1 ?keyword=2 monkey=3"  # not secret-named / no URL
    assert redact({"llm": {"base_url": "http://h/v1?key=QKEY-1"}}) == {"llm": {"base_url": "http://h/v1?key=***"}}
    assert redact_url("https://u:p@es:9200/?api_key=QKEY-2") == "https://***@es:9200/?api_key=***"
    client = LLMClient(model="m", base_url="http://H:8000/v1/?key=QKEY-1&api-version=1", cache_dir=str(tmp_path))
    assert client.stats()["endpoint"] == "http://h:8000/v1?key=***&api-version=1"
    same_endpoint_other_key = LLMClient(model="m", base_url="http://h:8000/v1?key=QKEY-9&api-version=1",
                                        cache_dir=str(tmp_path))
    assert same_endpoint_other_key.endpoint == client.endpoint  # the key is a credential, not the model's identity


def test_secrets_of_a_users_config_file_stay_out_of_multirun_yaml(toy_dir, tmp_path) -> None:
    """A secret written in the user's own YAML (here an LLM config with URL userinfo and a header) is masked in
    Hydra's multirun.yaml; the job itself still gets the real value (it runs, and nothing else holds it)."""
    conf = tmp_path / "conf" / "llm"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text(
        "defaults:\n  - openai_compatible\n  - _self_\n"
        f"base_url: http://user:{SENTINEL}@127.0.0.1:9/v1\n"
        f"params: {{extra_headers: {{Authorization: Bearer {SENTINEL}}}}}\n", encoding="utf-8")
    sweep = tmp_path / "sweep"
    r = run_cli(["-m", "--config-dir", str(tmp_path / "conf"), "llm=mine", *toy_args(toy_dir),
                 f"hydra.sweep.dir={sweep}", "run.ks=[5],[5,10]"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (sweep / "multirun.yaml").exists() and "***" in (sweep / "multirun.yaml").read_text()
    assert files_with(tmp_path / "sweep", SENTINEL) == [] and SENTINEL not in r.stdout + r.stderr


def test_an_api_key_with_a_carriage_return_is_used_and_never_quoted(toy_dir: Path, tmp_path: Path) -> None:
    """A key read from a CRLF .env file ends in \\r: httpx refused the header and its error ("Illegal header value
    b'Bearer <key>\\r'") put the whole key into predictions.jsonl and run.log, every question failing. The key is
    stripped (the run works) and registered as a secret; a control character inside it is a one-line error naming
    the variable, never the value."""
    key = "sk-CRLF-sentinel-4b1e"
    with StandInServer(latency_s=0.0) as server:
        args = toy_args(toy_dir, "agent=ircot", "llm=openai_compatible", "llm.model=standin", f"llm.base_url={server.url}",
                        "llm.cache=false", "llm.max_retries=0", "llm.api_key_env=GEAR_TEST_CRLF_KEY")
        ok = run_cli([*args, f"hydra.run.dir={tmp_path / 'ok'}"], tmp_path, env={"GEAR_TEST_CRLF_KEY": key + "\r"})
        assert ok.returncode == 0 and server.n_requests > 0, ok.stderr
        bad = run_cli([*args, f"hydra.run.dir={tmp_path / 'bad'}"], tmp_path,
                      env={"GEAR_TEST_CRLF_KEY": key[:8] + "\n" + key[8:]})
    assert bad.returncode == 2 and "GEAR_TEST_CRLF_KEY holds a character an HTTP header cannot carry" in bad.stderr
    for part in (key, key[8:]):
        assert files_with(tmp_path, part) == [], part
        assert part not in ok.stdout + ok.stderr + bad.stdout + bad.stderr, part


def test_a_reply_echoing_the_api_key_is_stored_without_it(toy_dir: Path, tmp_path: Path) -> None:
    """A reply that echoed the API key was stored as it came in the LLM reply cache ($GEAR_CACHE/llm) and written
    to predictions.jsonl. Registered secrets are masked in the reply before it is cached or used."""
    key = "sk-ECHO-sentinel-81d2"
    with StandInServer(latency_s=0.0, reply=lambda prompt: f"Amiens (my key is {key})") as server:
        args = toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.model=standin", f"llm.base_url={server.url}",
                        "llm.api_key_env=GEAR_TEST_ECHO_KEY", f"hydra.run.dir={tmp_path / 'run'}")
        r = run_cli(args, tmp_path, env={"GEAR_TEST_ECHO_KEY": key})
        assert r.returncode == 0 and server.n_requests == 3, r.stderr
    assert (tmp_path / "cache" / "llm_cache" / "cache.sqlite3").is_file()  # the replies were cached
    assert files_with(tmp_path, key) == []
    assert "Amiens (my key is ***)" in (tmp_path / "run" / "predictions.jsonl").read_text()
