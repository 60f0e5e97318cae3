"""One LLM client for every backend (OpenAI, vLLM, llama.cpp server, the embedded local model).

All calls go through the ``openai`` package against an OpenAI-compatible endpoint; ``llm=local``/``tiny``
start a llama.cpp server subprocess lazily on the first uncached call (``server.LlamaServer``).
Every call gets: a persistent cache keyed by (model, endpoint, messages, params; ``cache.py``); an overall
deadline of ``timeout_s`` per HTTP request (``deadline.py``: a server that trickles bytes cannot hang a call); bounded retries (the SDK's own for
429/5xx/timeouts/connection errors, a tenacity wrapper for malformed 2xx bodies, both counted in ``stats()``);
a token-ledger record (stage, round,
tokens, cached, latency, model; with ``record_prompts`` also the messages and the reply). Used by every LLM step of the paper: extraction (K.1, §6.2), reader,
gist memory, reasoner and rewriter (K.2, §4.1, §5) and QA (K.3).

Secrets: the API key is read from the environment variable named by ``api_key_env`` when the endpoint is
first contacted; it is never stored in the config, the cache, the ledger, logs or ``repr``.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from omegaconf import MISSING
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from gear_repro.llm.cache import (
    HOSTED_URL,
    LOCK_TIMEOUT_RANGE,
    LLMCache,
    LLMCacheMode,
    endpoint_identity,
    request_key,
    served_base_url,
)
from gear_repro.llm.deadline import DeadlineTransport, ReplyTooLarge
from gear_repro.llm.estimate import (
    ESTIMATE_LATENCY_RANGE,
    ESTIMATE_OUTPUT_RANGE,
    ESTIMATE_WARN_RANGE,
    EstimateSettings,
)
from gear_repro.llm.gguf_weights import served_weights
from gear_repro.llm.ledger import TokenLedger
from gear_repro.llm.parsing import strip_echo
from gear_repro.llm.server import LLMServerSettings
from gear_repro.llm.tokens import count_messages, count_text
from gear_repro.utils.component import Component
from gear_repro.utils.concurrency import COMPUTE
from gear_repro.utils.errors import ConfigError, GearError
from gear_repro.utils.secrets import header_secret, redact_strings, redact_text, register_query_secrets
from gear_repro.utils.settings import Range, Settings, check_number, num, range_text, refuse_unknown

if TYPE_CHECKING:
    from gear_repro.llm.server import LlamaServer

log = logging.getLogger(__name__)


class LLMCallError(GearError):
    """An LLM call failed for good (non-retryable error or retries exhausted)."""


class MalformedReply(Exception):
    """The endpoint answered 2xx with a body that is not a chat completion (retryable)."""


@dataclass
class LLMReply:
    """One chat reply; tokens from the server's usage (else tiktoken/estimate, see ``tokens_source``)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    latency_s: float
    model: str
    finish_reason: str | None = None
    tokens_source: str = "usage"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _malformed_types() -> tuple[type[BaseException], ...]:
    """Replies retried by the harness (the SDK does not): 2xx bodies that are not a chat completion, and bodies
    longer than ``llm.max_reply_bytes`` (:class:`~gear_repro.llm.deadline.ReplyTooLarge`, raised inside the transport,
    which the SDK passes on without a retry)."""
    import openai

    return (MalformedReply, ReplyTooLarge, openai.APIResponseValidationError, json.JSONDecodeError)


def _is_connection_error(exc: BaseException) -> bool:
    """A request that reached no server (refused, DNS, proxy), not a timeout of one that did."""
    import openai

    return isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError)


def _transport_retryable(exc: BaseException) -> bool:
    """Whether the SDK retried ``exc`` (its rule: connection errors and timeouts, 408/409/429/5xx)."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one
        return True
    return isinstance(exc, openai.APIStatusError) and (exc.status_code in (408, 409, 429) or exc.status_code >= 500)


def split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """``url`` without its query string, and the query's parameters: the SDK appends the route
    (``/chat/completions``) to the base URL as text, so a ``?key=...`` left in it would end up before the route;
    passed as the client's ``default_query`` it is sent with every request instead."""
    if not url or "?" not in url:
        return url, {}
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment)), \
        dict(parse_qsl(parts.query, keep_blank_values=True))


@cache
def chat_param_names() -> frozenset[str]:
    """The request parameters ``chat.completions.create`` of the installed OpenAI SDK accepts (its keyword
    arguments, less ``model`` and ``messages``, which the client sets): the API a request param must belong to."""
    from openai.resources.chat.completions import Completions

    return frozenset(inspect.signature(Completions.create).parameters) - {"self", "model", "messages"}


# llm.max_reply_bytes (llm/deadline.py): the llm schema in gear_repro/config.py declares it with this range
REPLY_BYTES_RANGE: Range = {"ge": 1024, "gt": None, "le": None, "lt": None}
# Allowed ranges of request params: temperature and max_tokens are also settings (llm.temperature, llm.max_tokens:
# the llm schema in gear_repro/config.py declares them with these), the others as the chat API documents them
# (OpenAI API reference, chat.completions.create)
PARAM_RANGES: dict[str, Range] = {
    "temperature": {"ge": 0, "gt": None, "le": 2, "lt": None}, "max_tokens": {"ge": 1, "gt": None, "le": None, "lt": None},
    "max_completion_tokens": {"ge": 1}, "top_p": {"ge": 0, "le": 1},
    "frequency_penalty": {"ge": -2, "le": 2}, "presence_penalty": {"ge": -2, "le": 2}}


def check_param_values(params: Mapping[str, Any], key: str) -> None:
    """ConfigError naming ``<key>.<name>`` for a request param outside its range (:data:`PARAM_RANGES`) or not a
    number: ``+llm.params.temperature=5`` is refused as ``llm.temperature=5`` is, not sent with every call."""
    for name, rng in PARAM_RANGES.items():
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}.{name} must be a number {range_text(rng)} (got {value!r})")
        check_number(f"{key}.{name}", value, rng)


def _openai_version() -> str:
    import openai

    return openai.__version__


def _token_count(value: Any) -> int | None:
    """A usage field as a count of tokens: a whole number >= 0 (12 or 12.0), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if value >= 0 else None


def _usage_counts(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reply's ``usage``, None when it gives none the ledger can use (absent, no
    prompt tokens, or a field that is not a whole number >= 0: ``"lots"`` failed the call for good, ``-50`` gave
    negative tokens per question and cost): the tokens are then counted from the texts."""
    if usage is None:
        return None
    pt, ct = _token_count(getattr(usage, "prompt_tokens", None)), getattr(usage, "completion_tokens", None)
    ct = 0 if ct is None else _token_count(ct)
    return None if not pt or ct is None else (pt, ct)


def _well_formed(text: str) -> str:
    """``text`` with a lone UTF-16 surrogate (a reply cut inside an emoji's pair by ``max_tokens``: JSON's escapes
    allow it) replaced by U+FFFD and escaped pairs joined, so that it can be cached, written and parsed (it could
    not be stored, and every retry paid for the same call)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass
class LLMClientSettings(Settings):
    """The ``llm`` group (docs/llm.md): the schema and :class:`LLMClient`'s settings, each field's default and
    meaning declared here (configs/llm/*.yaml set only what a preset changes). ``server``
    (:class:`~gear_repro.llm.server.LLMServerSettings`) makes the client start its own llama.cpp server, unless
    ``base_url`` is given."""

    config_key: ClassVar[str] = "llm"

    _target_: str = "gear_repro.llm.LLMClient"
    model: str = MISSING  # served model name or alias; part of the reply-cache key
    # endpoint root incl. /v1; null = api.openai.com, or the harness's own server when ``server`` is set
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"  # NAME of the env var holding the key (unset: a dummy key); null = none
    # 0 = greedy, as the papers; also the range of a *params temperature
    temperature: float | None = num(0.0, **PARAM_RANGES["temperature"])
    max_tokens: int | None = num(None, **PARAM_RANGES["max_tokens"])  # reply cap; null = the server's
    # more chat.completions.create parameters, e.g. {seed: 0, top_p: 1}; part of the reply-cache key
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = num(120.0, gt=0)  # seconds per request (llm/deadline.py: a trickled reply too)
    # a longer response body fails the call (a server ignoring max_tokens; 16 MiB; null = no cap; llm/deadline.py)
    max_reply_bytes: int | None = num(16 * 2**20, **REPLY_BYTES_RANGE)
    # retries per call: the openai SDK's own on 408/409/429/5xx/timeouts/connection errors (backoff 0.5 s doubling to
    # 8 s, Retry-After honoured) and the harness's on malformed 2xx bodies; all counted in llm_stats.json
    max_retries: int = num(4, ge=0)
    backoff_base_s: float = num(1.0, ge=0)  # malformed-reply retries: first delay, doubled per retry, jittered
    backoff_max_s: float = num(30.0, ge=0)  # malformed-reply retries: delay cap
    concurrency: int = num(4, ge=1)  # requests in flight at most (chat_many, run.workers questions)
    cache: bool = True  # persistent reply cache keyed by (model, what serves it, messages, params)
    cache_dir: str | None = None  # null = $GEAR_CACHE/llm_cache
    # SQLite journal of the reply cache (llm/cache.py): auto = journal when cache_dir is on a network file system,
    # else wal (docs/sweeps.md)
    cache_mode: LLMCacheMode = LLMCacheMode.auto
    # keep each call's messages and reply in predictions.jsonl (the explorer shows them; ~20 kB more per GEAR
    # question); false: the token ledger only
    record_prompts: bool = True
    # how long one reply-cache access waits in all for a lock another process holds (waits past 5 s are logged
    # naming the holder, then a clear error; llm/cache.py)
    cache_lock_timeout_s: float = num(300.0, **LOCK_TIMEOUT_RANGE)
    # start-up: a TCP connection to base_url (or the proxy HTTP(S)_PROXY/ALL_PROXY name for it) must open, else one
    # error before the first question; the harness's own server is checked by its flags instead; false: replay a
    # fully cached run without the endpoint
    check_endpoint: bool = True
    server: LLMServerSettings | None = None  # the llama.cpp server the harness starts; null = the endpoint is yours
    # prompt + reply tokens the model takes (set it to the served model's window); prompts drop their lowest-ranked
    # passages to fit (llm/context.py); null = unknown = no fitting
    context_window: int | None = num(None, ge=1)
    # the estimate said before a batch of calls (llm/estimate.py; docs/llm.md, "Before a large run"): seconds per call
    # assumed until the first calls are measured, output tokens per call when the data give none, and the $ / seconds
    # past which it is a WARNING (never a prompt)
    estimate_latency_s: float = num(2.0, **ESTIMATE_LATENCY_RANGE)
    estimate_output_tokens: int = num(200, **ESTIMATE_OUTPUT_RANGE)
    estimate_warn_usd: float = num(5.0, **ESTIMATE_WARN_RANGE)
    estimate_warn_s: float = num(3600.0, **ESTIMATE_WARN_RANGE)

    def __post_init__(self) -> None:
        if not self.model:  # MISSING is reported by the field check; an empty name would reach the API
            raise ConfigError("llm.model must be set")
        if self.server is not None and not isinstance(self.server, LLMServerSettings):
            refuse_unknown("llm.server", self.server, LLMServerSettings, "LlamaServer")
            self.server = LLMServerSettings(**self.server)
        super().__post_init__()


class LLMClient:
    """Chat client over an OpenAI-compatible endpoint with cache, retries, ledger and stats.

    Built by Hydra ``instantiate(cfg.llm)``: ``settings, **given`` are :class:`LLMClientSettings`; ``ledger`` the
    token ledger the calls are recorded in (a new one by default). ``context_window`` (tokens; None = unknown) is
    what methods fit their prompts to (:mod:`gear_repro.llm.context`).
    """

    def __init__(self, settings: LLMClientSettings | None = None, ledger: TokenLedger | None = None, **given: Any):
        s = self.settings = LLMClientSettings.of(settings, "LLMClient", **given)
        model, base_url, api_key_env, params = s.model, s.base_url, s.api_key_env, s.params
        server = None if s.server is None else asdict(s.server)
        check_env_name(api_key_env)
        self.model = model
        self.base_url = base_url
        # part of the cache key: what serves `model` (a URL, or the weights and reply-changing flags of the server the
        # harness starts: gguf_weights.served_weights)
        self.endpoint = endpoint_identity(served_base_url(base_url, server is not None)) or (
            served_weights({"model": model, "server": server}) if server and not base_url else None)
        self.api_key_env = api_key_env
        self.default_params: dict[str, Any] = {"temperature": s.temperature, "max_tokens": s.max_tokens,
                                               **dict(params or {})}
        self.check_params(dict(params or {}), "llm.params")
        register_query_secrets(self.default_params)
        self.timeout_s = float(s.timeout_s)
        self.max_reply_bytes = s.max_reply_bytes
        self.max_retries = s.max_retries
        self.backoff_base_s, self.backoff_max_s = float(s.backoff_base_s), float(s.backoff_max_s)
        self.concurrency = s.concurrency
        self._in_flight = threading.BoundedSemaphore(self.concurrency)  # requests in flight, from any thread
        self._in_flight_keys: dict[str, threading.Event] = {}  # cache keys being requested (single flight)
        self.cache = LLMCache(s.cache_dir, s.cache_mode, s.cache_lock_timeout_s) if s.cache else None
        self.check_endpoint = s.check_endpoint
        self._start_error: GearError | None = None  # a failed server start, raised again instead of retried
        self.server_cfg = server
        self.context_window = s.context_window  # llm/context.py
        self.record_prompts = s.record_prompts
        self.estimate = EstimateSettings(s.estimate_latency_s, s.estimate_output_tokens, s.estimate_warn_usd,
                                         s.estimate_warn_s)  # llm/estimate.py
        self.server = None
        self.ledger = ledger if ledger is not None else TokenLedger()
        self._client: Any = None
        self._lock = threading.Lock()
        self._stats: Counter[str] = Counter()
        self._attempts = threading.local()  # HTTP requests sent by this thread's current call
        self._warned_replay = False  # a sampled request (temperature > 0, no seed) was answered from the cache

    def __repr__(self) -> str:
        url = None if self.base_url is None else redact_text(self.base_url)
        return f"LLMClient(model={self.model!r}, base_url={url!r}, api_key_env={self.api_key_env!r})"

    # -- endpoint -----------------------------------------------------------------------------------------
    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """Start-up check of request params (``llm.params``, a component's ``llm_params``): each must be a keyword of
        the OpenAI SDK's ``chat.completions.create`` (:func:`chat_param_names`), ``stream`` off (a reply is read
        whole), a number in its range (:func:`check_param_values`); a ConfigError naming ``<key>.<name>`` otherwise,
        instead of every call failing."""
        known = chat_param_names()
        for name, value in params.items():
            if name not in known:
                raise ConfigError(f"{key}.{name} is not a parameter of the chat completions API (openai "
                                  f"{_openai_version()}: {', '.join(sorted(known))})")
            if name == "stream" and value:
                raise ConfigError(f"{key}.stream must be false: the harness reads each reply whole")
        check_param_values(params, key)

    def _api_key(self) -> str | None:
        """The key in ``api_key_env`` as a header value (:func:`header_secret`: stripped, registered, checked; httpx's
        "Illegal header value b'Bearer <key>\\r'" quoted it into errors, predictions.jsonl and run.log)."""
        if not self.api_key_env:
            return None
        return header_secret(os.environ.get(self.api_key_env), f"the environment variable {self.api_key_env}")

    def check_ready(self) -> None:
        """Start-up check, before the first question: a hosted endpoint (no base_url, no local server) needs its key
        set; a server the harness starts needs its model file (``llm.server.model_path``, found without assembling
        it) and ``llm.server.extra_args`` that its command line accepts (:meth:`LlamaServer.check_args`, without
        loading the model); a key set must fit in an HTTP header; and an endpoint the harness does not start must
        accept a connection (:meth:`check_reachable`; ``llm.check_endpoint=false`` skips it, to replay a fully
        cached run without the endpoint). Before, each of these failed every question in turn."""
        key = self._api_key()
        if self.base_url is None and self.server_cfg is None and not key:
            raise ConfigError(f"no API key: set the environment variable {self.api_key_env} "
                              "(or give llm.base_url for a local/self-hosted endpoint)")
        if self.base_url is None and self.server_cfg is not None:
            from gear_repro.llm.gguf_weights import check_model_path
            from gear_repro.llm.server import LlamaServer

            check_model_path(str(self.server_cfg.get("model_path")))
            LlamaServer(str(self.server_cfg["model_path"]), alias=self.model, settings=self.settings.server).check_args()
        elif self.check_endpoint:
            self.check_reachable()

    def target_url(self) -> str:
        """The URL requests go to: ``llm.base_url``, else the SDK's (``OPENAI_BASE_URL``, else the hosted API)."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or HOSTED_URL

    def check_reachable(self, timeout_s: float = 10.0) -> None:
        """ConfigError naming ``llm.base_url`` and the route (proxy or not) unless a TCP connection to the endpoint, or
        to the proxy the environment names for it, opens within ``min(timeout_s, llm.timeout_s)``: no request is sent
        (nothing is billed)."""
        import socket

        from gear_repro.llm.proxy import connect_address

        url = self.target_url()
        host, port, r = connect_address(split_query(url)[0] or url)
        try:
            with socket.create_connection((host, port), timeout=min(timeout_s, self.timeout_s)):
                return
        except OSError as e:
            where = f"the proxy {host}:{port}" if r.proxy else f"{host}:{port}"
            setting = "llm.base_url" if self.base_url else "llm.base_url (null: the SDK's default endpoint)"
            raise ConfigError(f"{setting}={redact_text(url)} is not reachable: no connection to {where} "
                              f"({type(e).__name__}: {redact_text(str(e))}); requests go {r.describe()}. Start the "
                              "server or fix the URL; llm.check_endpoint=false skips this check (a fully cached "
                              "run needs no endpoint)") from None

    def _ensure_client(self) -> Any:
        """The ``openai.OpenAI`` object, starting the local server first if configured."""
        with self._lock:
            if self.server is not None and not self.server.alive():
                self._client = None  # the server died (or was stopped): start a fresh one
            if self._client is not None:
                return self._client
            import openai

            base_url = self.base_url
            if base_url is None and self.server_cfg is not None:
                if self._start_error is not None:  # one failed start per run, not one per question
                    raise self._start_error
                try:
                    if self.server is None:
                        self.server = self.new_server()
                    base_url = self.server.start()
                except GearError as e:
                    self._start_error = e
                    raise
            key = self._api_key()
            if not key:
                if base_url is None:
                    raise ConfigError(f"no API key: set the environment variable {self.api_key_env} "
                                      "(or give llm.base_url for a local/self-hosted endpoint)")
                key = "not-needed"  # vLLM / llama.cpp servers accept any key
            # transport retries are the SDK's (backoff 0.5 s doubling to 8 s, Retry-After honoured); the request
            # hook counts every HTTP attempt so that stats()["retries"] includes them
            # timeout_s is also each request's overall deadline (DeadlineTransport), not only a per-read limit
            http = openai.DefaultHttpxClient(timeout=self.timeout_s, event_hooks={"request": [self._count_attempt]},
                                             transport=DeadlineTransport(self.timeout_s,
                                                                         max_bytes=self.max_reply_bytes))
            base_url, query = split_query(base_url)
            self._client = openai.OpenAI(api_key=key, base_url=base_url, default_query=query or None,
                                         max_retries=self.max_retries, timeout=self.timeout_s, http_client=http)
            return self._client

    def new_server(self) -> LlamaServer:
        """A (not yet started) ``LlamaServer`` from ``server`` (its ``model_path`` resolved: a GGUF path, ``qwen``
        assembled on demand, ``smollm2``)."""
        from gear_repro.llm.gguf_weights import resolve_model_path
        from gear_repro.llm.server import LlamaServer

        if self.server_cfg is None:
            raise ConfigError("llm.server is not set: this client uses an endpoint it does not start")
        path = resolve_model_path(str(self.server_cfg["model_path"]))
        return LlamaServer(path, alias=self.model, settings=self.settings.server)

    def _count_attempt(self, _request: Any) -> None:
        self._attempts.n = getattr(self._attempts, "n", 0) + 1

    def close(self) -> None:
        """Close the HTTP client and stop a harness-started server."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self.server is not None:
                self.server.stop()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls --------------------------------------------------------------------------------------------
    def _params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.default_params, **params}
        return {k: v for k, v in merged.items() if v is not None}

    def _bump(self, **counts: int) -> None:
        with self._lock:
            self._stats.update(counts)

    def _request(self, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
        """One HTTP round trip, validated; returns the cacheable reply fields."""
        client = self._ensure_client()
        with self._in_flight:
            resp = client.chat.completions.create(model=self.model, messages=messages, **params)
        choices = getattr(resp, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise MalformedReply(f"not a chat completion: {str(resp)[:200]!r}")
        text = choices[0].message.content
        if not isinstance(text, str):  # null: no reply at all (a refusal, a tool call), never an empty success
            raise MalformedReply(f"message content is {'null' if text is None else type(text).__name__} "
                                 f"(finish_reason {getattr(choices[0], 'finish_reason', None)!r})")
        text = _well_formed(text)
        usage = _usage_counts(getattr(resp, "usage", None))
        if usage is not None:
            (pt, ct), source = usage, "usage"
        else:
            pt, source = count_messages(messages, self.model)
            ct, _ = count_text(text, self.model)
        return {"text": text, "prompt_tokens": pt, "completion_tokens": ct,
                "finish_reason": getattr(choices[0], "finish_reason", None), "tokens_source": source,
                "model": getattr(resp, "model", None) or self.model}

    def _call_with_retries(self, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
        """``_request`` with malformed 2xx bodies retried (tenacity, ``backoff_*_s``); transport errors are
        retried inside the SDK (``max_retries``). Every extra HTTP attempt counts in ``stats()["retries"]``."""

        def log_retry(state: Any) -> None:
            log.warning("LLM call to %s: unusable reply (%s); retry %d/%d in %.2fs", self.model,
                        type(state.outcome.exception()).__name__, state.attempt_number, self.max_retries,
                        state.next_action.sleep)

        self._attempts.n = 0
        try:
            retrying = Retrying(retry=retry_if_exception_type(_malformed_types()), reraise=True,
                                stop=stop_after_attempt(self.max_retries + 1), before_sleep=log_retry,
                                wait=wait_random_exponential(multiplier=self.backoff_base_s, max=self.backoff_max_s))
            return retrying(self._request, messages, params)
        except GearError:
            raise  # configuration/server-start problems: retrying cannot help
        except Exception as e:
            exhausted = isinstance(e, _malformed_types()) or _transport_retryable(e)
            kind = "retries exhausted" if exhausted else "non-retryable"
            detail = str(e) if e.__cause__ is None or str(e.__cause__) in str(e) else f"{e} ({e.__cause__})"
            route = ""
            if _is_connection_error(e):  # behind a required proxy the bare "Connection error." gave no hint
                from gear_repro.llm.proxy import route as proxy_route

                target = self.server.base_url if self.server is not None else self.target_url()
                route = f"; to {redact_text(target)}, {proxy_route(target).describe()}"
            raise LLMCallError(f"LLM call to {self.model} failed ({kind} after {max(1, self._attempts.n)} "
                               f"attempt(s)): {type(e).__name__}: {redact_text(detail)[:300]}{route}") from e
        finally:
            self._bump(retries=max(0, self._attempts.n - 1))

    def chat(self, messages: list[dict], *, stage: str, **params: Any) -> LLMReply:
        """Send chat ``messages`` (cached); record the call under ``stage`` in ``self.ledger``, with the tags of
        the caller's :func:`gear_repro.llm.ledger.tags` (the method's ``round``, the runner's ``k``).

        ``params`` (temperature, max_tokens, stop, seed, ...) override the configured defaults and are
        part of the cache key. Raises ``LLMCallError`` when the call fails for good.
        """
        req = self._params(params)
        t0 = time.perf_counter()
        key = request_key(self.model, messages, req, self.endpoint) if self.cache is not None else None
        self._bump(calls=1)
        hit = self.cache.get(key) if self.cache is not None and key else None
        owner = False
        if hit is None and key:
            owner, hit = self._join_in_flight(key)
        if hit is not None:
            self._bump(cache_hits=1)
            self._warn_replay(req)
            reply = LLMReply(text=hit["text"], prompt_tokens=hit["prompt_tokens"],
                             completion_tokens=hit["completion_tokens"], cached=True,
                             latency_s=round_s(time.perf_counter() - t0), model=hit.get("model") or self.model,
                             finish_reason=hit.get("finish_reason"), tokens_source=hit.get("tokens_source", "usage"))
        else:
            self._bump(cache_misses=1)
            try:
                with COMPUTE.released():  # other questions compute while this one waits (run.workers)
                    # a secret the reply echoes is masked as the cache stores it: a replay reads the same text
                    out = redact_strings(self._call_with_retries(messages, req))
                if self.cache is not None and key:
                    self.cache.put(key, self.model, out)
            except LLMCallError as e:
                self._bump(failures=1)
                self.ledger.add(stage=stage, prompt_tokens=0, completion_tokens=0, cached=False,
                                latency_s=round_s(time.perf_counter() - t0), model=self.model,
                                tokens_source=None, ok=False, error=str(e)[:300], **self._recorded(messages, None))
                raise
            finally:
                if owner:
                    self._leave_in_flight(key)
            reply = LLMReply(text=out["text"], prompt_tokens=out["prompt_tokens"],
                             completion_tokens=out["completion_tokens"], cached=False,
                             latency_s=round_s(time.perf_counter() - t0), model=out["model"],
                             finish_reason=out["finish_reason"], tokens_source=out["tokens_source"])
        self._bump(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        raw = reply.text
        text, echoed = strip_echo(raw, [str(m.get("content") or "") for m in messages])
        if echoed:  # the methods parse the completion; the raw reply stays in the cache and the ledger's record
            self._bump(echoed=1)
            reply = replace(reply, text=text)
        truncated = reply.finish_reason == "length"
        if truncated:
            self._warn_truncated(stage, req)
        self.ledger.add(stage=stage, prompt_tokens=reply.prompt_tokens,
                        completion_tokens=reply.completion_tokens, cached=reply.cached, latency_s=reply.latency_s,
                        model=reply.model, tokens_source=reply.tokens_source, ok=True, error=None,
                        **({"echo": True} if echoed else {}), **({"truncated": True} if truncated else {}),
                        **self._recorded(messages, raw))
        return reply

    def _warn_truncated(self, stage: str, req: Mapping[str, Any]) -> None:
        """Count a reply cut off at ``max_tokens`` (``finish_reason`` "length"; cached ones too) and warn at the first
        of this client's: the methods parse what came ("Answer: Par" is scored as "Par"), which before went unsaid
        everywhere but the extraction's stats."""
        with self._lock:
            self._stats.update(truncated=1)
            first = self._stats["truncated"] == 1
        if first:
            log.warning("%s: a %s reply was cut off at max_tokens=%s (finish_reason 'length') and is parsed as it is; "
                        "such replies are counted (llm_stats.json 'truncated', metrics.json agent_stats "
                        "llm_truncated_replies): raise llm.max_tokens or the component's max_tokens", self.model,
                        stage, req.get("max_tokens", req.get("max_completion_tokens")))

    def _warn_replay(self, req: Mapping[str, Any]) -> None:
        """Warn once when a sampled request (temperature > 0, no ``seed``) is answered from the reply cache: the
        same request gets the first sample back, so a re-run (or a repeated call in one run) is no new draw and
        runs meant to measure sampling spread give one number; before, nothing said so."""
        temperature = req.get("temperature")
        if self._warned_replay or not isinstance(temperature, (int, float)) or temperature <= 0 or "seed" in req:
            return
        self._warned_replay = True
        log.warning("%s: a request at temperature %s (no seed) was answered from the reply cache: the same request "
                    "gets its first sample back, so re-runs (and repeated calls in one run) are no new draws; "
                    "llm.cache=false draws anew, +llm.params.seed=N names the sample", self.model, temperature)

    def _recorded(self, messages: list[dict], reply: str | None) -> dict[str, Any]:
        """The call's prompt and reply for its ledger record when ``record_prompts`` (else nothing)."""
        if not self.record_prompts:
            return {}
        return {"messages": [dict(m) for m in messages], "reply": reply}

    def _join_in_flight(self, key: str) -> tuple[bool, dict | None]:
        """Single flight: the first thread to miss ``key`` owns the request (True, None); a thread that finds it in
        flight waits for it and takes the cached reply (False, reply), or sends its own if the owner failed."""
        with self._lock:
            done = self._in_flight_keys.get(key)
            if done is None:
                self._in_flight_keys[key] = threading.Event()
                return True, None
        with COMPUTE.released():
            done.wait()
        return False, self.cache.get(key) if self.cache is not None else None

    def _leave_in_flight(self, key: str) -> None:
        with self._lock:
            self._in_flight_keys.pop(key).set()

    def chat_many(self, batch: Sequence[list[dict]], *, stage: str, return_exceptions: bool = False,
                  **params: Any) -> list[Any]:
        """``chat`` over many message lists with ``concurrency`` threads; results in input order.

        With ``return_exceptions`` a failed call yields its ``LLMCallError`` in place instead of raising.
        """
        if not batch:
            return []
        if self.server_cfg is not None and self.base_url is None:
            self._ensure_client_if_needed(batch, params)

        def one(msgs: list[dict]) -> Any:
            try:
                return self.chat(msgs, stage=stage, **params)
            except LLMCallError as e:
                if return_exceptions:
                    return e
                raise

        if self.concurrency == 1 or len(batch) == 1:
            return [one(m) for m in batch]
        # the caller's ledger scope and tags (ledger.call_scope, ledger.tags) in each request's thread
        contexts = [contextvars.copy_context() for _ in batch]
        with COMPUTE.released(), ThreadPoolExecutor(max_workers=min(self.concurrency, len(batch))) as ex:
            return list(ex.map(lambda cm: cm[0].run(one, cm[1]), zip(contexts, batch, strict=True)))

    def is_cached(self, messages: list[dict], **params: Any) -> bool:
        """Whether the reply cache already answers ``messages`` with ``params`` (no request would be sent)."""
        if self.cache is None:
            return False
        return self.cache.get(request_key(self.model, messages, self._params(params), self.endpoint)) is not None

    def _ensure_client_if_needed(self, batch: Sequence[list[dict]], params: Mapping[str, Any]) -> None:
        """Start a local server from the calling thread when some request misses the cache."""
        req = self._params(params)
        if self.cache is None or any(self.cache.get(request_key(self.model, m, req, self.endpoint)) is None
                                     for m in batch):
            self._ensure_client()

    def stats(self) -> dict[str, Any]:
        """Counters: calls, cache_hits, cache_misses, retries, failures, echoed (replies that repeated their prompt,
        ``parsing.strip_echo``), truncated (replies cut off at max_tokens), prompt/completion tokens; the cache hit rate
        (hits / calls, None without calls) and the endpoint that identifies the model in the cache."""
        with self._lock:
            base = {k: 0 for k in ("calls", "cache_hits", "cache_misses", "retries", "failures", "echoed",
                                   "truncated", "prompt_tokens", "completion_tokens")}
            out: dict[str, Any] = base | dict(self._stats)
        out["cache_hit_rate"] = round(out["cache_hits"] / out["calls"], 4) if out["calls"] else None
        out["endpoint"] = self.endpoint
        out["cache_mode"] = self.cache.mode if self.cache is not None else None
        return out


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def looks_like_env_name(value: object) -> bool:
    """Whether ``value`` can be an environment variable's NAME (a key, e.g. "sk-...", cannot)."""
    return isinstance(value, str) and bool(_ENV_NAME.fullmatch(value)) and not value.lower().startswith("sk_")


def check_env_name(api_key_env: object) -> None:
    """ConfigError (that never repeats the value: it may be a key) unless ``api_key_env`` names a variable."""
    if api_key_env and not looks_like_env_name(api_key_env):
        raise ConfigError("llm.api_key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY); "
                          "the value given looks like a key itself (not shown). Put the key in the environment")


def round_s(x: float) -> float:
    return round(x, 4)

# the registry's declaration (gear_repro/registry.py); Resources builds the client from its node
COMPONENTS = (Component("llm", "llm_schema", LLMClientSettings, LLMClientSettings._target_),)
