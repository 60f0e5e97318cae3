"""An overall deadline for every HTTP request of an LLM call.

httpx's timeouts bound each socket read, so a server that sends one byte every 0.5 s never trips a 5 s timeout.
:class:`DeadlineTransport` runs each request (connect, headers and the whole body) in a helper thread and gives up
after ``deadline_s`` with httpx's ``ReadTimeout``, which the ``openai`` SDK treats like any timeout (retried up to
``llm.max_retries`` times, then the call fails). An abandoned request stops reading at its next chunk; one whose
server trickles the response headers holds its helper thread until the server stops.

The same transport caps a reply's body at ``max_bytes`` (``llm.max_reply_bytes``), counted after decoding a
compressed one (``Content-Encoding: gzip``): a server that ignores ``max_tokens`` and streams megabytes fails the
request (:class:`ReplyTooLarge`, a transport error the SDK retries like any other) instead of filling memory, the
reply cache and the ledger.

Built without an ``inner`` transport it sends each request through the proxy the environment names
(``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``, ``NO_PROXY``: :mod:`gear_repro.llm.proxy`), as the SDK's own client
does: httpx reads those variables only for a transport it builds itself.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any


def httpx_module() -> ModuleType:
    """The httpx package the installed ``openai`` SDK is built on (``httpx``, or a renamed fork of it)."""
    import openai

    client = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    return importlib.import_module(client.__module__.split(".")[0])


class ReplyTooLarge(Exception):
    """A response body longer than ``llm.max_reply_bytes``."""


class DeadlineTransport:
    """An httpx transport (duck-typed) that answers each request in full within ``deadline_s`` or raises
    ``ReadTimeout``, and whose bodies are at most ``max_bytes`` long (None = no cap) or it raises
    :class:`ReplyTooLarge`; ``inner`` (default: httpx's ``HTTPTransport``) does the I/O."""

    def __init__(self, deadline_s: float, inner: Any | None = None, max_bytes: int | None = None,
                 environ: Mapping[str, str] | None = None):
        self.deadline_s = float(deadline_s)
        self.max_bytes = max_bytes
        self.httpx = httpx_module()
        self.inner = inner if inner is not None else self.httpx.HTTPTransport()
        # without `inner`: requests go through the proxy the environment names (llm/proxy.py), one transport each
        self.environ = None if inner is not None else dict(os.environ if environ is None else environ)
        self._proxied: dict[str, Any] = {}
        self._lock = threading.Lock()

    def transport_for(self, url: str) -> Any:
        """The transport a request to ``url`` goes through: the proxy's (``HTTP(S)_PROXY``/``ALL_PROXY``, less
        ``NO_PROXY``), else ``inner``. A SOCKS proxy without the ``socksio`` package is a ConfigError naming the
        variable."""
        from gear_repro.llm.proxy import route

        if self.environ is None:
            return self.inner
        r = route(url, self.environ)
        if r.proxy is None:
            return self.inner
        with self._lock:
            if r.proxy not in self._proxied:
                try:
                    self._proxied[r.proxy] = self.httpx.HTTPTransport(proxy=r.proxy)
                except (ImportError, ValueError) as e:
                    from gear_repro.utils.errors import ConfigError
                    from gear_repro.utils.secrets import redact_text

                    raise ConfigError(f"{r.why} names a proxy the HTTP client cannot use "
                                      f"({redact_text(str(e))})") from None
            return self._proxied[r.proxy]

    def handle_request(self, request: Any) -> Any:
        result: dict[str, Any] = {}
        cancelled = threading.Event()
        inner = self.transport_for(str(request.url))

        def attempt() -> None:
            try:
                response = inner.handle_request(request)
                try:
                    self._check_size(int(response.headers.get("content-length") or 0))
                    # decoded as read (gzip, deflate, ...: httpx's decoders): the cap counts the reply's bytes,
                    # not the wire's (64 KiB of gzip can be 50 MB of reply)
                    decoding = self.httpx.Response(response.status_code, headers=response.headers,
                                                   stream=response.stream, request=request)
                    chunks, size = [], 0
                    for chunk in decoding.iter_bytes():
                        if cancelled.is_set():
                            return
                        size += len(chunk)
                        self._check_size(size)
                        chunks.append(chunk)
                finally:
                    response.close()
                body = b"".join(chunks)
                headers = [(k, v) for k, v in response.headers.multi_items()
                           if k.lower() not in ("content-encoding", "content-length")]
                result["response"] = self.httpx.Response(
                    response.status_code, headers=[*headers, ("content-length", str(len(body)))],
                    stream=self.httpx.ByteStream(body), extensions=response.extensions)
            except BaseException as e:  # handed to the caller's thread
                result["error"] = e

        worker = threading.Thread(target=attempt, name="llm-request", daemon=True)
        worker.start()
        worker.join(self.deadline_s)
        if worker.is_alive():
            cancelled.set()
            raise self.httpx.ReadTimeout(f"no complete reply within llm.timeout_s={self.deadline_s:g} s (the overall "
                                         "deadline of one request)", request=request)
        if "error" in result:
            raise result["error"]
        return result["response"]

    def _check_size(self, size: int) -> None:
        if self.max_bytes is not None and size > self.max_bytes:
            raise ReplyTooLarge(f"the reply is longer than llm.max_reply_bytes={self.max_bytes} bytes (a server "
                                "ignoring max_tokens?); the call fails instead of reading it whole")

    def close(self) -> None:
        self.inner.close()
        for transport in self._proxied.values():
            transport.close()

    def __enter__(self) -> DeadlineTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)
