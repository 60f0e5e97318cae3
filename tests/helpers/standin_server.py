"""A stand-in OpenAI-compatible endpoint (stdlib HTTP server in a thread) for measuring and testing concurrency.

Each ``/v1/chat/completions`` request waits ``latency_s`` (plus seeded random jitter up to ``jitter_s``, so requests
finish out of order) and answers with ``reply(last user message)``: the same text for the same prompt, whatever the
timing. ``max_in_flight`` records the peak number of requests served at once. Used by
``benchmarks/bench_llm_concurrency.py``, ``benchmarks/bench_llm_fullsize.py`` and the concurrency/fault tests.

``reply=standin_reply`` answers the prompts of the harness's stages with replies they parse: the K.1 extraction
prompt (GEAR App. K.1) with a ``{"named_entities": [...], "triples": [...]}`` JSON built from the passage, the
HippoRAG query-NER prompt with ``{"named_entities": [...]}``, a QA prompt with a short answer, and the multi-step
methods' prompts (:func:`method_reply`: GEAR's reader, reasoner and rewriter, IRCoT's thought, T²RAG's decomposition
and resolve) with replies in the formats their parsers read. ``faults=Faults(...)``
adds a seeded schedule of 429s (with ``Retry-After``), 500s and slow replies, decided per (prompt, attempt) so the
same requests fail whatever the order threads send them in. ``served``/``requests`` count, per prompt digest
(:func:`prompt_digest`), the 200 replies and all requests; ``usage="tokens"`` reports usage with the harness's own
token counter (as a hosted API reports its tokenizer's). ``GET /stats`` returns the counters as JSON (``?digests=1``
with the per-prompt counts, ``&reset=1`` zeroes them), for a server run in its own process::

    python -m tests.helpers.standin_server --latency 0.002 --p429 0.03 --p500 0.01 --p-slow 0.01
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

SENTENCES = ("Paris is the capital of France.", "Emmanuel Macron was born in Amiens.",
             "Amiens lies on the Somme.", "So the answer is: Amiens.")


def default_reply(prompt: str) -> str:
    """One of a few fixed sentences, chosen by the prompt's hash."""
    return SENTENCES[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(SENTENCES)]


def prompt_digest(prompt: str) -> str:
    """The key the server counts a prompt (the last message's text) under: its sha1, hex."""
    return hashlib.sha1(prompt.encode("utf-8", "surrogatepass")).hexdigest()


_PARAGRAPH = re.compile(r"Paragraph:\n```\n(.*?)\n\n(.*?)\n```\s*$", re.S)
_NAME = re.compile(r"\b[A-Z][\w'-]+(?: [A-Z][\w'-]+)*")


def _names(text: str, n: int) -> list[str]:
    """Up to ``n`` distinct capitalised phrases of ``text``, in order (the stand-in's "named entities")."""
    out: list[str] = []
    for m in _NAME.finditer(text):
        if m.group(0) not in out:
            out.append(m.group(0))
        if len(out) == n:
            break
    return out


_DOCS = re.compile(r"Now you are given some documents:\n(.*?)\n\nBased on these documents", re.S)
_FACTS = re.compile(r'\("([^"]*)", "([^"]*)", "([^"]*)"\)')
_THOUGHT = re.compile(r"\nQuestion: (.*?)\nThought:(.*)$", re.S)
_CLUE = re.compile(r"Subject: (.*)\n\s*Predicate: (.*)\n\s*Object: (.*)")


def _between(text: str, start: str, end: str) -> str:
    """The part of ``text`` after the first ``start`` and before the next ``end`` ("" without ``start``)."""
    return text.split(start, 1)[1].split(end, 1)[0] if start in text else ""


def _topic(question: str) -> list[str]:
    """The question's first name after its first word (a capitalised question word is no name), else "it"."""
    return _names(question.strip().split(" ", 1)[-1], 1) or ["it"]


def method_reply(prompt: str) -> str | None:
    """A parseable reply to a multi-step method's prompt, built from the prompt's own capitalised phrases, or None
    for other prompts. GEAR: the reader gives two facts linking the documents' first names, the reasoner answers
    once the facts hold four triples (so an agent runs two rounds), the rewriter asks about the question's first
    name; IRCoT: a first thought naming two of the passages' names, then "So the answer is:"; T²RAG: a
    decomposition into one triplet with a "?", and each traceable clue resolved with a name of the propositions."""
    prompt = prompt.replace("Wikipedia Title: ", "")  # the passages' title mark is no name
    if (docs := _DOCS.search(prompt)) and "supporting fact(s)" in prompt:
        a, b, c = (_names(docs.group(1), 3) + ["it", "it", "it"])[:3]
        return f'("{a}", "related to", "{b}"), ("{b}", "related to", "{c}")'
    if "Answerable: Yes" in prompt and prompt.rstrip().endswith("# Your reply:"):
        facts = _FACTS.findall(_between(prompt, "Facts:", "\n\nYour reply"))
        if len(facts) >= 4:
            return f"Answerable: Yes\nAnswer: {facts[-1][2]}"
        return "Answerable: No\nWhy: The facts do not name the answer yet."
    if prompt.rstrip().endswith("Next Question:"):
        names = _topic(_between(prompt, "# Your Task:\nQuestion:", "\n"))
        return f"What is {names[0]} known for?"
    if (m := _THOUGHT.search(prompt)) and "So the answer is" not in m.group(2):
        names = _names(prompt[: m.start()], 2) + ["it", "it"]
        return f"So the answer is: {names[1]}." if m.group(2).strip() else f"{names[0]} is related to {names[1]}."
    if "Provide your response in this format:" in prompt and "Triples:" in prompt:
        names = _topic(prompt.rsplit("Question:", 1)[-1].split("\n")[0])
        return f"Reasoning: I need what {names[0]} relates to.\n\nTriples:\n{names[0]} | related to | ?\n"
    if "Return two lists in this format:" in prompt:
        found = _names(_between(prompt, "Context Propositions:", "Return two lists"), 1) or ["unknown"]
        clues = _CLUE.findall(_between(prompt, "Traceable Clues:", "Fuzzy Clues:"))
        return "\n\n".join(f"Fully Resolved Clue {i + 1}:\nSubject: {s.replace('?', found[0])}\nPredicate: {p}\n"
                             f"Object: {o.replace('?', found[0])}" for i, (s, p, o) in enumerate(clues)) or "None"
    return None


def standin_reply(prompt: str) -> str:
    """A reply the stage that sent ``prompt`` parses: K.1 extraction JSON (entities + triples from the passage's
    title and capitalised phrases), query NER JSON, a short QA answer, or a multi-step method's reply
    (:func:`method_reply`); other prompts get :func:`default_reply`."""
    m = _PARAGRAPH.search(prompt)
    if m and "named entity list and a triple list" in prompt:
        title, text = m.group(1).strip(), m.group(2)
        ents = [e for e in _names(text, 10) if e != title] or [text.split()[0] if text.split() else "it"]
        triples = [[title, "mentions", e] for e in ents[:9]]
        return json.dumps({"named_entities": [title, *ents], "triples": triples})
    question = prompt.rsplit("Question:", 1)[-1] if "Question:" in prompt else ""
    # query NER: its demonstration is an earlier turn, so the last message may be the question line alone
    if question and ('"named_entities"' in prompt or "\n" not in prompt.strip() and prompt.lstrip().startswith("Question:")):
        return json.dumps({"named_entities": _names(question, 3)})
    if prompt.rstrip().endswith("Answer:") and question:
        words = _names(question.split("\n")[0], 1)
        return words[0] if words else "unknown"
    return method_reply(prompt) or default_reply(prompt)


@dataclass(frozen=True)
class Faults:
    """Seeded fault schedule: each (prompt, attempt) draws u in [0, 1) from sha256(seed, attempt, prompt); u < p429 is
    a 429 with ``Retry-After`` (seconds, and ``retry-after-ms``, which the OpenAI SDK prefers), the next p500 a 500,
    the next p_slow a 200 after ``slow_s`` more. ``max_per_prompt`` caps the faults one prompt gets (None = no cap)."""

    p429: float = 0.0
    p500: float = 0.0
    p_slow: float = 0.0
    slow_s: float = 0.5
    retry_after_s: float = 0.05
    seed: int = 0
    max_per_prompt: int | None = None

    def draw(self, digest: str, attempt: int) -> str | None:
        """'429', '500', 'slow' or None for the ``attempt``-th request (0-based) of the prompt ``digest``."""
        h = hashlib.sha256(f"{self.seed}:{attempt}:{digest}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2**64
        if u < self.p429:
            return "429"
        if u < self.p429 + self.p500:
            return "500"
        if u < self.p429 + self.p500 + self.p_slow:
            return "slow"
        return None


class StandInServer:
    """``with StandInServer(latency_s=0.5) as s: ... s.url ...``: an endpoint on 127.0.0.1 (``port`` 0 = a free one)."""

    def __init__(self, latency_s: float = 0.5, jitter_s: float = 0.0, seed: int = 0,
                 reply: Callable[[str], str] = default_reply, finish_reason: str = "stop",
                 faults: Faults | None = None, port: int = 0, usage: str = "words"):
        self.latency_s, self.jitter_s, self.reply = latency_s, jitter_s, reply
        self.finish_reason = finish_reason  # "length": every reply says it was cut off at max_tokens
        self.faults = faults
        self.usage = usage  # "words": usage counts words; "tokens": the harness's own counter (llm/tokens.py)
        self.paths: list[str] = []  # each request's path with its query string
        self.n_requests = self.in_flight = self.max_in_flight = 0
        self.status: Counter[str] = Counter()  # "200", "429", "500", and "slow" (200s that came late)
        self.requests: Counter[str] = Counter()  # prompt digest -> requests received
        self.served: Counter[str] = Counter()  # prompt digest -> 200 replies sent
        self._faulted: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def _fault(self, digest: str) -> str | None:
        """The schedule's verdict for this prompt's next request (counted under the lock)."""
        with self._lock:
            attempt = self.requests[digest]
            self.requests[digest] += 1
            if self.faults is None:
                return None
            cap = self.faults.max_per_prompt
            kind = None if cap is not None and self._faulted[digest] >= cap else self.faults.draw(digest, attempt)
            if kind is not None:
                self._faulted[digest] += 1
                self.status[kind] += 1
            return kind

    def _serve(self, body: dict[str, Any], extra_s: float) -> bytes:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            delay = self.latency_s + extra_s + (self._rng.uniform(0, self.jitter_s) if self.jitter_s else 0.0)
        try:
            if delay > 0:
                time.sleep(delay)
            text = self.reply(str(body["messages"][-1]["content"]))
            if self.usage == "tokens":
                from gear_repro.llm.tokens import count_messages, count_text

                n_in, n_out = count_messages(body["messages"], str(body.get("model")))[0], \
                    count_text(text, str(body.get("model")))[0]
            else:
                n_in, n_out = sum(len(str(m.get("content", "")).split()) for m in body["messages"]), len(text.split())
            return json.dumps({
                "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": self.finish_reason, "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
            }).encode()
        finally:
            with self._lock:
                self.in_flight -= 1

    def stats(self, digests: bool = False, reset: bool = False) -> dict[str, Any]:
        """Counters as JSON-ready data (per-prompt ones with ``digests``); ``reset`` zeroes them after reading."""
        with self._lock:
            out: dict[str, Any] = {"n_requests": self.n_requests, "status": dict(self.status),
                                   "max_in_flight": self.max_in_flight, "prompts": len(self.requests)}
            if digests:
                out["requests"], out["served"] = dict(self.requests), dict(self.served)
            if reset:
                self.n_requests = self.max_in_flight = 0
                self.status, self.requests, self.served = Counter(), Counter(), Counter()
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the SDK's pooled connections are reused, as with an API
            disable_nagle_algorithm = True  # else a kept-alive reply's body waits ~40 ms on the client's delayed ACK

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, out: bytes, headers: dict[str, str] | None = None) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client killed mid-request
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(out)

            def do_GET(self) -> None:  # noqa: N802
                q = parse_qs(urlsplit(self.path).query)
                self._send(200, json.dumps(server.stats("digests" in q, "reset" in q)).encode())

            def do_POST(self) -> None:  # noqa: N802
                server.paths.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                digest = prompt_digest(str(body["messages"][-1]["content"]))
                with server._lock:
                    server.n_requests += 1
                kind = server._fault(digest)
                if kind in ("429", "500"):
                    err = {"error": {"message": f"stand-in {kind}", "type": "rate_limit" if kind == "429" else "server"}}
                    ra = server.faults.retry_after_s if server.faults else 0.0
                    headers = {"Retry-After": f"{ra:g}", "retry-after-ms": str(int(ra * 1000))} if kind == "429" else {}
                    self._send(int(kind), json.dumps(err).encode(), headers)
                    return
                out = server._serve(body, server.faults.slow_s if kind == "slow" and server.faults else 0.0)
                with server._lock:
                    server.served[digest] += 1
                    server.status["200"] += 1
                self._send(200, out)

        return Handler

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StandInServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    """Serve :func:`standin_reply` until killed; prints the URL as the first line of stdout."""
    ap = argparse.ArgumentParser(description="stand-in OpenAI-compatible endpoint (tests/helpers/standin_server.py)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.002, help="seconds per reply (default 0.002)")
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--p429", type=float, default=0.0)
    ap.add_argument("--p500", type=float, default=0.0)
    ap.add_argument("--p-slow", type=float, default=0.0)
    ap.add_argument("--slow-s", type=float, default=0.5)
    ap.add_argument("--retry-after-s", type=float, default=0.05)
    a = ap.parse_args(argv)
    faults = Faults(a.p429, a.p500, a.p_slow, a.slow_s, a.retry_after_s, a.seed)
    server = StandInServer(a.latency, a.jitter, a.seed, reply=standin_reply, faults=faults, port=a.port,
                           usage="tokens")
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.close()
        sys.exit(0)


if __name__ == "__main__":
    main()
