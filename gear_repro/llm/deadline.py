"""An overall deadline for every HTTP request of an LLM call (issue 23).

httpx's timeouts bound each socket read, so a server that sends one byte every 0.5 s never trips a 5 s timeout.
:class:`DeadlineTransport` runs each request (connect, headers and the whole body) in a helper thread and gives up
after ``deadline_s`` with httpx's ``ReadTimeout``, which the ``openai`` SDK treats like any timeout (retried up to
``llm.max_retries`` times, then the call fails). An abandoned request stops reading at its next chunk; one whose
server trickles the response headers holds its helper thread until the server stops.

The same transport caps a reply's body at ``max_bytes`` (``llm.max_reply_bytes``), counted after decoding a
compressed one (``Content-Encoding: gzip``): a server that ignores ``max_tokens`` and streams megabytes fails the
request (:class:`ReplyTooLarge`, a transport error the SDK retries like any other) instead of filling memory, the
reply cache and the ledger.
"""

from __future__ import annotations

import importlib
import threading
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

    def __init__(self, deadline_s: float, inner: Any | None = None, max_bytes: int | None = None):
        self.deadline_s = float(deadline_s)
        self.max_bytes = max_bytes
        self.httpx = httpx_module()
        self.inner = inner if inner is not None else self.httpx.HTTPTransport()

    def handle_request(self, request: Any) -> Any:
        result: dict[str, Any] = {}
        cancelled = threading.Event()

        def attempt() -> None:
            try:
                response = self.inner.handle_request(request)
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

    def __enter__(self) -> DeadlineTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)
