"""Deterministic stand-ins for the LLM and the embedder, used by the logic tests and the golden rankings.

``ScriptedLLM`` answers every prompt of the harness (K.2 reader, GEAR reason/rewrite, HippoRAG NER, IRCoT
thoughts, T²RAG decompose/resolve/answer, K.3 QA) in the format of its template, with entities drawn from the
prompt's own passage titles and picked by the prompt's hash: the same prompt gets the same reply, whichever
order or process asks. ``HashEmbedder`` gives each text a fixed vector from its words (feature hashing), so
dense retrieval, the path scorer and HippoRAG's synonym edges run their real code paths without a model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

import numpy as np

from gear_repro.embedding.embedder import SentenceEmbedder
from gear_repro.llm import LLMReply, TokenLedger
from gear_repro.types import Ranking

_TITLE = re.compile(r"^Wikipedia Title: (.+)$", re.MULTILINE)
_FALLBACK = ("Paris", "France", "Berlin", "Germany", "Amiens")


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)


def template_reply(prompt: str, h: int, entities: Sequence[str]) -> str | None:
    """The reply to a harness prompt recognised by its template (GEAR reader/reason/rewrite, T²RAG
    decompose/resolve/answer), entities and verdicts picked from ``entities`` by the hash ``h``; None otherwise."""
    a, b, c = (entities[(h >> (8 * i)) % len(entities)] for i in range(3))
    if "Fully Resolved Clue" in prompt:  # T²RAG resolve
        more = f"\n\nNewly Searchable Clue 1:\nSubject: {b}\nPredicate: located in\nObject: ?" if h % 2 else ""
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


def scripted_text(prompt: str, stage: str, round_no: int = 0) -> str:
    """A reply in the format the prompt asks for; entities are titles shown in the prompt's last passages."""
    h = _digest(f"{stage}|{round_no}|{prompt}")
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

    def __init__(self, script: dict | list | None = None, model: str = "scripted") -> None:
        self.script = list(script) if isinstance(script, list) else script
        self.model = model
        self.ledger = TokenLedger()
        self.calls: list[dict] = []

    def _text(self, prompt: str, stage: str, round_no: int) -> str:
        if self.script is None:
            return scripted_text(prompt, stage, round_no)
        if isinstance(self.script, list):
            return self.script.pop(0) if self.script else ""
        reply = self.script.get((stage, round_no), self.script.get(stage, ""))
        return reply(prompt) if callable(reply) else reply

    def chat(self, messages: Sequence[dict], *, stage: str, round_no: int = 0, **params) -> LLMReply:
        prompt = "\n".join(str(m["content"]) for m in messages)
        text = self._text(prompt, stage, round_no)
        self.calls.append({"stage": stage, "round": round_no, "prompt": prompt, "reply": text,
                           "messages": messages, "params": params})
        n_in, n_out = len(prompt.split()), len(text.split())
        self.ledger.add(stage=stage, round=round_no, prompt_tokens=n_in, completion_tokens=n_out, cached=False,
                        latency_s=0.0, model=self.model)
        return LLMReply(text=text, prompt_tokens=n_in, completion_tokens=n_out, cached=False, latency_s=0.0,
                        model=self.model)

    def stages(self) -> list[tuple[str, int]]:
        return [(c["stage"], c["round"]) for c in self.calls]

    def check_ready(self) -> None:
        """Always ready (the real client checks its credentials)."""


class HashEmbedder(SentenceEmbedder):
    """The real embedder class (caches, memo, batch independence) with feature hashing in place of a model:
    each lower-cased word adds a ±1 to one of ``dim`` buckets, then the vector is L2-normalised."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(model=f"hash-{dim}", show_progress=False)
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

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

    def _encode_shapes(self, texts: list[str], rows: int) -> np.ndarray:
        return self._encode(texts)  # no batches to shape: each vector is a function of its text


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

    def expand(self, query: str, base: Ranking, **_: object):
        from gear_repro.core.fusion import rrf
        from gear_repro.methods.gear.expansion import ExpansionOutput

        return ExpansionOutput(rrf([list(base.ids), self.expanded]), {"expanded": list(self.expanded)})
