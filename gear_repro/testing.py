"""A stand-in LLM for examples and smoke runs without a model (examples/quickstart.ipynb; the test suite's own
doubles are in tests/helpers/doubles.py).

:class:`StandInLLM` answers the harness's GEAR and QA prompts in the format each asks for, from the corpus's own
triples: the reader (App. K.2) lists the known triples of the passages its prompt shows, those sharing most words
with the question first; the reasoner (Eq. 6) says "not answerable" until round ``answer_round``, then answers
with the last fact's object; the rewriter (Eq. 7) asks about that object; the QA reader (K.3) answers with the
first shown passage's best triple's object. It is no model: numbers from it measure the pipeline's mechanics,
not a method. Each call is recorded in the run's ledger with its messages and reply, as an ``LLMClient`` with
``record_prompts=true`` records it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gear_repro.llm.client import LLMReply
from gear_repro.llm.ledger import TokenLedger, active_tags
from gear_repro.types import Passage, Triple

__all__ = ["StandInLLM"]

_TITLE = re.compile(r"^Wikipedia Title: (.+)$", re.MULTILINE)
_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)
_FACT = re.compile(r'\("([^"]*)", "([^"]*)", "([^"]*)"\)')
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


class StandInLLM:
    """The LLM role (:class:`gear_repro.llm.base.LLM`) without a model; see the module doc.

    Args:
        passages, triples: the corpus and its triples (what the reader's replies are made of): Passage/Triple
            objects, lists of dicts or DataFrames.
        answer_round: the round whose reasoner call says "Answerable: Yes" (earlier rounds: "No").
        facts: triples per reader reply.
    """

    model = "stand-in"
    concurrency = 1
    context_window: int | None = None

    def __init__(self, passages: Sequence[Passage] | Any, triples: Sequence[Triple] | Any, answer_round: int = 2,
                 facts: int = 3) -> None:
        from gear_repro.data.records import passages_from, triples_from

        if not all(isinstance(p, Passage) for p in passages):  # records or a DataFrame, checked as the loader does
            passages = passages_from(passages)
        if not all(isinstance(t, Triple) for t in triples):
            triples = triples_from(triples)
        self.default_params: Mapping[str, Any] = {}
        self.answer_round = answer_round
        self.facts = facts
        by_passage: dict[str, list[Triple]] = {}
        for t in triples:
            by_passage.setdefault(t.passage_id, []).append(t)
        self._by_title = {p.title: by_passage.get(p.id, []) for p in passages}
        self.ledger = TokenLedger()
        self.n_calls = 0

    def _read(self, prompt: str) -> str:
        question = (_QUESTION.findall(prompt) or [""])[-1]
        asked = _words(question)
        shown = [t for title in _TITLE.findall(prompt) for t in self._by_title.get(title, [])]
        best = sorted(shown, key=lambda t: -len(asked & _words(t.text)))[: self.facts]
        return "Facts: " + ", ".join(f'("{t.subject}", "{t.predicate}", "{t.object}")' for t in best)

    def _reply(self, prompt: str, n_round: int) -> str:
        facts = _FACT.findall(prompt.rsplit("\nQuestion: ", 1)[-1])  # the task's facts, not the example's
        last = facts[-1][2] if facts else "unknown"
        if "knowlege triples" in prompt:  # K.2 reader (SyncGE read, GEAR gist)
            return self._read(prompt)
        if "Answerable: Yes" in prompt:  # Eq. 6 reason
            if n_round >= self.answer_round and facts:
                return f"Answerable: Yes\nAnswer: {last}"
            return "Answerable: No\nWhy: the facts do not name the answer yet."
        if "Next Question:" in prompt:  # Eq. 7 rewrite
            return f"Next Question: What is known about {last}?"
        if "Wikipedia Title:" in prompt:  # K.3 QA
            first = self._read(prompt)
            found = _FACT.findall(first)
            return f"Answer: {found[0][2] if found else (_TITLE.findall(prompt) or ['unknown'])[-1]}"
        return ""

    def chat(self, messages: Sequence[dict], *, stage: str, **params: Any) -> LLMReply:
        prompt = "\n".join(str(m["content"]) for m in messages)
        text = self._reply(prompt, int(active_tags()["round"]))  # the method's round (ledger.tags)
        n_in, n_out = len(prompt.split()), len(text.split())
        self.n_calls += 1
        self.ledger.add(stage=stage, prompt_tokens=n_in, completion_tokens=n_out, cached=False,
                        latency_s=0.0, model=self.model, tokens_source="words", ok=True, error=None,
                        messages=[dict(m) for m in messages], reply=text)
        return LLMReply(text=text, prompt_tokens=n_in, completion_tokens=n_out, cached=False, latency_s=0.0,
                        model=self.model, tokens_source="words")

    def check_ready(self) -> None:
        """Always ready."""

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """Any request params are accepted (none is read)."""

    def stats(self) -> dict[str, Any]:
        return {"calls": self.n_calls, "cache_hits": 0, "cache_misses": self.n_calls, "retries": 0, "failures": 0}

    def close(self) -> None:
        """Nothing to stop."""
