"""A stand-in OpenAI-compatible endpoint (stdlib HTTP server in a thread) for measuring and testing concurrency.

Each ``/v1/chat/completions`` request waits ``latency_s`` (plus seeded random jitter up to ``jitter_s``, so requests
finish out of order) and answers with ``reply(last user message)``: the same text for the same prompt, whatever the
timing. ``max_in_flight`` records the peak number of requests served at once. Used by
``benchmarks/bench_llm_concurrency.py`` and ``tests/test_concurrency.py``.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SENTENCES = ("Paris is the capital of France.", "Emmanuel Macron was born in Amiens.",
             "Amiens lies on the Somme.", "So the answer is: Amiens.")


def default_reply(prompt: str) -> str:
    """One of a few fixed sentences, chosen by the prompt's hash."""
    return SENTENCES[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(SENTENCES)]


class StandInServer:
    """``with StandInServer(latency_s=0.5) as s: ... s.url ...``: an endpoint on 127.0.0.1, a free port."""

    def __init__(self, latency_s: float = 0.5, jitter_s: float = 0.0, seed: int = 0,
                 reply: Callable[[str], str] = default_reply, finish_reason: str = "stop"):
        self.latency_s, self.jitter_s, self.reply = latency_s, jitter_s, reply
        self.finish_reason = finish_reason  # "length": every reply says it was cut off at max_tokens
        self.paths: list[str] = []  # each request's path with its query string
        self.n_requests = self.in_flight = self.max_in_flight = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def _serve(self, body: dict[str, Any]) -> bytes:
        with self._lock:
            self.n_requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            delay = self.latency_s + self._rng.uniform(0, self.jitter_s)
        try:
            time.sleep(delay)
            text = self.reply(str(body["messages"][-1]["content"]))
            n_in = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
            return json.dumps({
                "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": self.finish_reason, "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": len(text.split()),
                          "total_tokens": n_in + len(text.split())},
            }).encode()
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                server.paths.append(self.path)
                out = server._serve(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        return Handler

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StandInServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
