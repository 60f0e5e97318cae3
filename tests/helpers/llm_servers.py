"""Faulty OpenAI-compatible endpoints on 127.0.0.1 (stdlib http.server in a thread), each bounded in time.

``TrickleServer`` sends the headers at once and then a valid completion one byte every ``interval_s``;
``NullContentServer`` answers 200 with ``message.content: null``; ``FloodServer`` a valid completion of ``n_chars``
characters (a server ignoring max_tokens), with or without a Content-Length; ``ProxyEndpoint`` a forward proxy that
answers itself. All count the requests they served.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str | None, model: str = "m") -> bytes:
    """A chat completion body with ``content`` (None = null) and a usage record."""
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()


class _Server:
    """Base: a threaded HTTP server whose POST handler is :meth:`respond`; ``url`` ends in /v1."""

    def __init__(self) -> None:
        self.n_requests = 0
        self.stop = threading.Event()  # set on close: every handler returns
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                server.n_requests += 1
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    server.respond(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    @staticmethod
    def headers(h: BaseHTTPRequestHandler, length: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(length))
        h.end_headers()
        h.wfile.flush()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TrickleServer(_Server):
    """A valid reply sent one byte every ``interval_s`` (a 100-byte body takes ``100 * interval_s``)."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        super().__init__()

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        body = completion("a patient client gets this reply in the end")
        self.headers(h, len(body))
        for i in range(len(body)):
            if self.stop.wait(self.interval_s):
                return
            h.wfile.write(body[i:i + 1])
            h.wfile.flush()


class NullContentServer(_Server):
    """200 with ``message.content: null`` for the first ``n_null`` requests (default all), then "Paris"."""

    def __init__(self, n_null: int | None = None):
        self.n_null = n_null
        super().__init__()

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        null = self.n_null is None or self.n_requests <= self.n_null
        body = completion(None if null else "Paris")
        self.headers(h, len(body))
        h.wfile.write(body)


class FloodServer(_Server):
    """A valid completion whose content is ``n_chars`` x "a"; ``length_header=False`` sends no Content-Length (the
    body ends when the connection closes), so only counting the bytes read can stop it; ``gzip=True`` sends it
    gzip-compressed (``Content-Encoding: gzip``; 4 MB of "a" is 4 KB on the wire)."""

    def __init__(self, n_chars: int, length_header: bool = True, gzip: bool = False):
        self.n_chars, self.length_header, self.gzip = n_chars, length_header, gzip
        super().__init__()

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        body = completion("a" * self.n_chars)
        if self.gzip:
            body = gzip.compress(body)
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Encoding", "gzip")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
        elif self.length_header:
            self.headers(h, len(body))
        else:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Connection", "close")
            h.end_headers()
            h.close_connection = True
        for i in range(0, len(body), 65536):
            h.wfile.write(body[i:i + 65536])


class ProxyEndpoint(_Server):
    """An HTTP forward proxy that is its own endpoint: it answers every request it is sent with a completion
    ("via proxy") and records the request target (``targets``: the absolute URL a client sends a proxy), so a test
    sees that a request for a host that does not resolve (``http://llm.invalid/v1``) went through it."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        super().__init__()

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        self.targets.append(h.path)
        body = completion("via proxy")
        self.headers(h, len(body))
        h.wfile.write(body)


def elapsed(fn: Any) -> tuple[float, BaseException | None]:
    """Seconds ``fn()`` took and the exception it raised (None if it returned)."""
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:
        return time.monotonic() - t0, e
    return time.monotonic() - t0, None


def hang_network(monkeypatch, calls: list[str], seconds: float = 5.0) -> None:
    """Every way out of the process (a socket's connect, requests, urllib) hangs ``seconds``, as behind a proxy that
    never answers, then fails; each attempt is recorded in ``calls``."""
    import socket
    import urllib.request

    import requests

    def hang(what: str):
        def blocked(*args, **kwargs):
            calls.append(f"{what} {args[1] if what == 'connect' and len(args) > 1 else args[:1]}")
            time.sleep(seconds)
            raise OSError(f"{what}: no answer after {seconds} s")
        return blocked

    monkeypatch.setattr(socket.socket, "connect", hang("connect"))
    monkeypatch.setattr(socket, "create_connection", hang("create_connection"))
    monkeypatch.setattr(requests, "get", hang("requests.get"))
    monkeypatch.setattr(requests.Session, "request", hang("requests.Session.request"))
    monkeypatch.setattr(urllib.request, "urlopen", hang("urlopen"))
