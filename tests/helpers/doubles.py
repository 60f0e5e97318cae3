"""Deterministic stand-ins for the LLM, the embedder and small components, shared by the tests (no test file defines
its own LLM or embedder double).

LLMs: ``ScriptedLLM`` answers every prompt of the harness (K.2 reader, GEAR reason/rewrite, HippoRAG NER, IRCoT
thoughts, T²RAG decompose/resolve/answer, K.3 QA) in the format of its template, with entities drawn from the
prompt's own passage titles and picked by the prompt's hash (the same prompt gets the same reply, whichever order
or process asks), or from a script; ``ExtractionLLM`` serves K.1 extraction with failures, delays and blocking.
Embedders: ``HashEmbedder`` is the real ``SentenceEmbedder`` (caches, memo) with feature hashing in place of a
model, so dense retrieval, the path scorer and HippoRAG's synonym edges run their real code paths;
``TableEmbedder`` is a light double whose vectors a test sets (a table, a default, or seeded per text or per word).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gear_repro import BaseRetriever
from gear_repro.embedding.cuda_graphs import ShapeGraphs, _Shape
from gear_repro.embedding.embedder import SentenceEmbedder
from gear_repro.llm import LLMCallError, LLMReply, TokenLedger
from gear_repro.llm.ledger import active_tags
from gear_repro.types import Passage, Ranking

_TITLE = re.compile(r"^Wikipedia Title: (.+)$", re.MULTILINE)
_FALLBACK = ("Paris", "France", "Berlin", "Germany", "Amiens")


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)


def template_reply(prompt: str, h: int, entities: Sequence[str]) -> str | None:
    """The reply to a harness prompt recognised by its template (GEAR reader/reason/rewrite, T²RAG
    decompose/resolve/answer), entities and verdicts picked from ``entities`` by the hash ``h``; None otherwise."""
    a, b, c = (entities[(h >> (8 * i)) % len(entities)] for i in range(3))
    if "Fully Resolved Clue" in prompt:  # T²RAG resolve, in the prompt's wording (the paper's or the code's)
        new = "Newly Traceable Clue" if "Newly Traceable Clue" in prompt else "Newly Searchable Clue"
        more = f"\n\n{new} 1:\nSubject: {b}\nPredicate: located in\nObject: ?" if h % 2 else ""
        return f"Fully Resolved Clue 1:\nSubject: {a}\nPredicate: related to\nObject: {b}{more}"
    if "Key Reasoning Clues" in prompt:  # T²RAG answer
        return a
    if "extracting the necessary knowledge triples" in prompt:  # T²RAG decompose
        return f"Triples:\n{a} | related to | ?x\n?x | located in | ?"
    if "what else information is needed" in prompt:  # GEAR rewrite
        return f"Next Question: Where is {a}?"
    if "Answerable: Yes" in prompt:  # GEAR reason
        return f"Answerable: Yes\nAnswer: {a}" if h % 3 == 0 else "Answerable: No\nWhy: a fact is missing."
    if "knowlege triples" in prompt:  # K.2 reader (SyncGE read, GEAR gist)
        return f'Facts: ("{a}", "related to", "{b}"), ("{b}", "located in", "{c}")'
    return None


def scripted_text(prompt: str, stage: str, n_round: int = 0) -> str:
    """A reply in the format the prompt asks for; entities are titles shown in the prompt's last passages (picked by
    a hash of the stage, the round and the prompt)."""
    h = _digest(f"{stage}|{n_round}|{prompt}")
    titles = _TITLE.findall(prompt.rsplit("# Your Task", 1)[-1]) or _TITLE.findall(prompt)[-5:] or list(_FALLBACK)
    reply = template_reply(prompt, h, titles)
    if reply is not None:
        return reply
    a, b, c = (titles[(h >> (8 * i)) % len(titles)] for i in range(3))
    if "named_entities" in prompt:  # HippoRAG query NER
        return json.dumps({"named_entities": [a, b]})
    if stage == "cot":  # IRCoT thought
        return f"{a} is related to {b}. So the answer is: {c}." if h % 3 == 0 else f"{a} is related to {b}."
    return f"Answer: {a}"  # K.3 QA reader


class ScriptedLLM:
    """LLM client double with the real client's ``chat`` signature; every call goes to ``ledger`` and ``calls``.

    ``script``: None (default) replies in the format each prompt asks for (:func:`scripted_text`); a dict replies by
    ``(stage, round)``, else by ``stage``, else "" (a value may be a function of the prompt); a list gives its
    replies in turn, then "". ``ScriptedLLM({})`` answers every call with "" (no triples, not answerable).
    """

    def __init__(self, script: dict | list | None = None, model: str = "scripted", context_window: int | None = None,
                 default_params: dict[str, Any] | None = None, concurrency: int = 1) -> None:
        self.script = list(script) if isinstance(script, list) else script
        self.model = model
        self.context_window = context_window  # the LLM role's attributes (llm/base.py)
        self.default_params = dict(default_params or {})
        self.concurrency = concurrency
        self.ledger = TokenLedger()
        self.calls: list[dict] = []

    def _text(self, prompt: str, stage: str, n_round: int) -> str:
        if self.script is None:
            return scripted_text(prompt, stage, n_round)
        if isinstance(self.script, list):
            return self.script.pop(0) if self.script else ""
        reply = self.script.get((stage, n_round), self.script.get(stage, ""))
        return reply(prompt) if callable(reply) else reply

    def chat(self, messages: Sequence[dict], *, stage: str, **params) -> LLMReply:
        prompt = "\n".join(str(m["content"]) for m in messages)
        n_round = int(active_tags()["round"])  # the caller's round (ledger.tags), as the real client records it
        text = self._text(prompt, stage, n_round)
        self.calls.append({"stage": stage, "round": n_round, "prompt": prompt, "reply": text,
                           "messages": messages, "params": params})
        n_in, n_out = len(prompt.split()), len(text.split())
        self.ledger.add(stage=stage, prompt_tokens=n_in, completion_tokens=n_out, cached=False,
                        latency_s=0.0, model=self.model)
        return LLMReply(text=text, prompt_tokens=n_in, completion_tokens=n_out, cached=False, latency_s=0.0,
                        model=self.model)

    def stages(self) -> list[tuple[str, int]]:
        return [(c["stage"], c["round"]) for c in self.calls]

    def check_ready(self) -> None:
        """Always ready (the real client checks its credentials)."""

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """A script reads no params: any are accepted."""

    def stats(self) -> dict[str, Any]:
        """The real client's counters that apply: every call is a miss of no cache."""
        return {"calls": len(self.calls), "cache_hits": 0, "cache_misses": len(self.calls), "retries": 0,
                "failures": 0}

    def close(self) -> None:
        """Nothing to stop."""


def extraction_reply(title: str, i: int) -> str:
    """A K.1 reply for the ``i``-th passage, cycling through the reply shapes a real model produces."""
    kind = i % 5
    t = json.dumps(title)
    if kind == 0:  # the paper's demonstration format (not a repair)
        return (f'{{"named_entities": [{t}, "X"]}}\n{{\n"triples": [\n({t}, "related to", "X"),\n'
                '("X", "part of", "Y"),\n]\n}')
    if kind == 1:  # fenced, cut off mid-way -> repaired; one wrong-arity triple dropped
        return (f'```json\n{{"named_entities": [{t}]}}\n{{"triples": [[{t}, "is", "a thing"], '
                f'["only two", "parts"], [{t}, "ha')
    if kind == 2:  # prose, no structure -> parse failure, zero triples
        return "I am sorry, I cannot extract triples from this paragraph."
    if kind == 3:  # empty triple list
        return '{"named_entities": []}\n{"triples": []}'
    return f'{{"named_entities": [{t}], "triples": [[{t}, "a", "b"], [{t}, "c", "d"], [{t}, "e", "f"]]}}'


class ExtractionLLM(ScriptedLLM):
    """K.1 extraction stand-in (stage ``extract`` only) with the client's ``chat`` signature: the reply is chosen by the
    passage's position (:func:`extraction_reply`); ``fail_ids`` raise, ``delay``/``seed`` sleep, ``block_after`` blocks
    forever (a process killed mid-run); ``calls`` lists the passage titles asked for, in order."""

    def __init__(self, passages: list[Passage], fail_ids: set[str] = frozenset(), delay: float = 0.0,  # type: ignore[assignment]
                 block_after: int | None = None, seed: int | None = None, concurrency: int = 1):
        super().__init__(concurrency=concurrency)
        self.index = {p.title: i for i, p in enumerate(passages)}
        self.titles = [p.title for p in passages]
        self.ids = {p.title: p.id for p in passages}
        self.fail_ids, self.delay = set(fail_ids), delay
        self.block_after = block_after  # calls after this many block forever (the process is killed there)
        self.rng = random.Random(seed) if seed is not None else None  # random per-call delays
        self.calls: list[str] = []  # type: ignore[assignment]  # titles, not call records
        self._lock = threading.Lock()

    def chat(self, messages: list[dict], *, stage: str, **params: Any) -> LLMReply:
        assert stage == "extract" and active_tags()["round"] == 0
        text = messages[-1]["content"]
        title = next(t for t in sorted(self.titles, key=len, reverse=True) if f"```\n{t}\n\n" in text)
        with self._lock:
            self.calls.append(title)
            n_call = len(self.calls)
            delay = self.rng.uniform(0, 0.02) if self.rng is not None else self.delay
        if self.block_after is not None and n_call > self.block_after:
            threading.Event().wait()  # never returns: the test kills this process here
        if self.ids[title] in self.fail_ids:
            raise LLMCallError("retries exhausted (scripted)")
        time.sleep(delay)
        return LLMReply(text=extraction_reply(title, self.index[title]), prompt_tokens=100 + self.index[title],
                        completion_tokens=10, cached=False, latency_s=0.5, model="scripted")


class CallCounter:
    """A spy: calls the function it wraps and counts the calls by their first argument (as a string)."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.calls: Counter[str] = Counter()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls[str(args[0])] += 1
        return self.fn(*args, **kwargs)


class HashEmbedder(SentenceEmbedder):
    """The real embedder class (caches, memo, batch independence) with feature hashing in place of a model:
    each lower-cased word adds a ±1 to one of ``dim`` buckets, then the vector is L2-normalised."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(model=f"hash-{dim}", show_progress=False)
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def check_ready(self) -> None:
        """No weights to find."""

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = _digest(word)
                out[i, h % self._dim] += 1.0 if (h >> 20) & 1 else -1.0
            norm = float(np.linalg.norm(out[i]))
            out[i] = out[i] / norm if norm else out[i]
        self.stats["encoded"] += len(texts)
        return out

    def _encode_shapes(self, texts: list[str], rows: int, pieces=None) -> np.ndarray:
        return self._encode(texts)  # no batches to shape, no word pieces: each vector is a function of its text

    def batch_order(self, texts: Sequence[str]) -> np.ndarray:
        """Longest first, as sentence-transformers batches (no model to ask)."""
        return np.argsort([-len(t) for t in texts], kind="stable")


class PaddedHashEmbedder(HashEmbedder):
    """A :class:`HashEmbedder` whose vectors depend on the batch a text meets, as a real model's do through
    padding: a call is sorted longest first and cut into ``batch_size`` batches (as sentence-transformers does), and
    each vector's first component gets its batch's longest text length × 1e-3."""

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        texts = list(texts)
        out = super()._encode(texts)
        order = self.batch_order(texts)
        for s in range(0, len(texts), self.batch_size):
            batch = order[s:s + self.batch_size]
            out[batch, 0] += max(len(texts[i]) for i in batch) * 1e-3
        return out


class TerminatingEmbedder(PaddedHashEmbedder):
    """Sends SIGTERM to its own process (as a scheduler or ``kill`` does) when a call would pass ``after`` texts."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if self.stats["encoded"] + len(texts) > self.after:
            os.kill(os.getpid(), signal.SIGTERM)
        return super()._encode(texts, progress)


class PlainRetriever:
    """A retriever of a user's package that does not subclass ``gear_repro.BaseRetriever`` (the wiring refuses it)."""

    def __init__(self, passages: list, name: str = "plain") -> None:
        self.passages = passages

    def retrieve(self, query: str, k: int) -> Ranking:
        return Ranking([p.id for p in self.passages[:k]], [1.0] * min(k, len(self.passages)))


class TitleRetriever(BaseRetriever):
    """The README's user retriever: ranks passages by the words their title shares with the query."""

    name = "title"

    def __init__(self, passages: list, boost: float = 1.0, name: str = "title") -> None:
        self.passages, self.boost = passages, boost

    def retrieve(self, query: str, k: int) -> Ranking:
        words = set(query.lower().split())
        scored = sorted(((self.boost * len(words & set(p.title.lower().split())), p.id)
                         for p in self.passages), reverse=True)[:k]
        return Ranking([pid for _, pid in scored], [float(s) for s, _ in scored])


class TableEmbedder:
    """Embedder double without a model or a cache (what retrievers, scorers and indexes call: ``encode``,
    ``encode_corpus``, ``dim``, ``model_id``): every unit has a fixed unit vector, its ``table`` entry (zero-padded
    to ``dim``), else ``default``, else a pseudo-random direction seeded by ``key(unit)``.

    Units are whole texts, or words with ``split`` (a text -> its words): a text's vector is then the normalised mean
    of its words' vectors, and ``encode_tokens`` gives one vector per word (GRIEVER's entity matcher), so an
    n-gram's vector equals the embedding of the same words as a text. ``calls`` records the texts of every encode."""

    def __init__(self, dim: int = 8, table: dict[str, Sequence[float]] | None = None, *,
                 default: Sequence[float] | None = None, key: Callable[[str], str] | None = None,
                 split: Callable[[str], list[str]] | None = None, model_id: str = "table") -> None:
        self.dim, self.model_id = dim, model_id
        self.table = {k: self._pad(v) for k, v in (table or {}).items()}
        self.default = None if default is None else self._pad(default)
        self.key, self.split = key or (lambda t: t), split
        self.calls: list[list[str]] = []
        self.stats = {"encoded": 0}

    def _pad(self, v: Sequence[float]) -> np.ndarray:
        out = np.zeros(self.dim, np.float32)
        out[: len(v)] = v
        return out

    def unit(self, u: str) -> np.ndarray:
        """The unit vector of one unit (a text, or a word with ``split``)."""
        k = self.key(u)
        v = self.table.get(k, self.default)
        if v is None:
            seed = sum((i + 1) * ord(c) for i, c in enumerate(k))  # position-weighted character codes
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def _text(self, text: str) -> np.ndarray:
        if self.split is None:
            return self.unit(text)
        v = np.mean([self.unit(w) for w in self.split(text) or ["<empty>"]], axis=0)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def describe(self) -> dict:
        return {"model": self.model_id, "model_id": self.model_id}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.stats["encoded"] += len(texts)
        return np.stack([self._text(t) for t in texts]) if len(texts) else np.zeros((0, self.dim), np.float32)

    def check_ready(self) -> None:
        """No weights to find."""

    def encode_corpus(self, texts: Sequence[str], desc: str = "") -> np.ndarray:
        return self.encode(texts)

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)

    def encode_fixed(self, texts: Sequence[str], rows: int) -> np.ndarray:
        return self.encode(texts)

    def encode_tokens(self, text: str, ws: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """GRIEVER's token encoder: the sentence vector, one vector per word of ``ws``, their token counts (1)."""
        sums = np.stack([self.unit(w.text) for w in ws]) if ws else np.zeros((0, self.dim), np.float32)
        return self._text(text), sums, np.ones(len(ws), np.float32)


class FixedRetriever:
    """Retriever stand-in: the same ids for every query (scores 1/rank); records the queries."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = list(ids)
        self.queries: list[str] = []

    def retrieve(self, query: str, k: int) -> Ranking:
        self.queries.append(query)
        top = self.ids[:k]
        return Ranking(top, [1.0 / (i + 1) for i in range(len(top))])


class FixedExpansion:
    """Graph-expansion stand-in: C~_q = ``expanded`` for every call, C_q = RRF(base, C~_q) (GEAR Eq. 3)."""

    def __init__(self, expanded: Sequence[str]) -> None:
        self.expanded = list(expanded)

    def describe(self) -> dict:
        return {"name": "fixed"}

    def expand(self, query: str, base: Ranking, *, read_query: str | None = None,
               memory: Sequence[Sequence[str]] = ()):
        from gear_repro.core.fusion import rrf
        from gear_repro.methods.gear.expansion import ExpansionOutput

        return ExpansionOutput(rrf([list(base.ids), self.expanded]), {"expanded": list(self.expanded)})


class EagerShapeGraphs(ShapeGraphs):
    """:class:`ShapeGraphs` on a CPU: its "capture" keeps the static tensors and its "replay" runs the forward again
    into the static output, its streams are no-ops, so what the embedder and :meth:`ShapeGraphs.encode` do around
    capture and replay (one static input and output per shape, overwritten by the next pass of that shape; the one
    copy of a call's inputs; the order of the rows) runs without a GPU. The capture numbered ``fail_at`` (0 = the
    first) raises what CUDA raises for a host sync inside a capture."""

    def __init__(self, forward, device: str, dim: int, fail_at: int | None = None) -> None:
        super().__init__(forward, "cpu", dim)
        self.fail_at = fail_at

    def _on_device(self):
        return contextlib.nullcontext()

    def _to_device(self, tensor):
        return tensor

    def _current_stream(self):
        return None

    @staticmethod
    def _wait(stream, other) -> None:
        """No streams on a CPU."""

    @staticmethod
    def _on(stream):
        return contextlib.nullcontext()

    def _capture(self, static_in):
        if self.fail_at is not None and self.captured >= self.fail_at:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        static_out = self.forward(static_in)
        return _Shape(lambda: static_out.copy_(self.forward(static_in)), static_in, static_out, None)
