"""Finished runs of every method on a slice of the bundled MuSiQue sample, made with the test doubles (scripted LLM,
hashing embedder): the input of the HTML explorer's tests and of benchmarks/bench_explorer.py.

``hostile=True`` plants markup where data reaches the page: a gold passage's title and text hold
``</script><b>"'&`` and an ``<img onerror>``, a question's text too, and the scripted replies quote that title (the
double draws its entities from the passages' titles). ``fail_question`` makes the LLM raise, with markup in the
message, on that question's first GEAR read, so one run has an errored question.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import SAMPLE, write_jsonl
from tests.helpers.doubles import HashEmbedder, ScriptedLLM
from tests.helpers.paper_setting import put_on_paper_setting
from tests.helpers.runs import run_with_doubles

HOSTILE_TITLE = " </script><b>\"'&"
HOSTILE_HTML = ' <img src=x onerror="window.__pwned=1"> \u2028<script>window.__pwned=2</script>'
ERROR_MESSAGE = "endpoint said <b>boom</b> & \"quit\""
METHODS: dict[str, list[str]] = {  # run folder -> overrides (tests/test_golden_rankings.py's presets)
    "bm25": ["retriever=bm25"],
    "bm25+sync": ["retriever=bm25", "expansion=sync"],
    "gear": ["agent=gear", "retriever=hybrid"],
    "hipporag": ["agent=hipporag"],
    "ircot": ["agent=ircot", "retriever=bm25"],
    "t2rag": ["agent=t2rag"],
}


class FailingLLM(ScriptedLLM):
    """The scripted LLM, except that a K.2 read whose prompt holds ``marker`` raises (a dead endpoint), and that a
    reply to a prompt holding the hostile question quotes the hostile title in its free text (a "Why:" or a
    "Thought:"), so markup reaches the page through an LLM reply whatever the retrieval put in the prompt."""

    def __init__(self, marker: str | None) -> None:
        super().__init__()
        self.marker = marker

    def chat(self, messages: Sequence[dict], *, stage: str, **params):
        hostile = any(HOSTILE_HTML in str(m["content"]) for m in messages)
        if self.marker and stage == "read" and any(self.marker in str(m["content"]) for m in messages):
            raise RuntimeError(ERROR_MESSAGE)
        reply = super().chat(messages, stage=stage, **params)
        if hostile and "Why: " in reply.text:
            reply = dataclasses.replace(reply, text=reply.text.replace("Why: ", f"Why:{HOSTILE_TITLE} ", 1))
        return reply


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def make_dataset(dest: Path, n_passages: int, n_questions: int, hostile: bool) -> list[dict]:
    """The sample's first passages, their triples and the first questions whose gold lies among them."""
    dest.mkdir(parents=True, exist_ok=True)
    corpus = _rows(SAMPLE / "corpus.jsonl")[:n_passages]
    keep = {p["id"] for p in corpus}
    questions = [q for q in _rows(SAMPLE / "questions.jsonl") if set(q["gold_ids"]) <= keep][:n_questions]
    if hostile:
        target = questions[0]["gold_ids"][0]
        for p in corpus:
            if p["id"] == target:
                p["title"] += HOSTILE_TITLE
                p["text"] += HOSTILE_HTML
        questions[0]["question"] += HOSTILE_HTML
    write_jsonl(dest / "corpus.jsonl", corpus)
    write_jsonl(dest / "questions.jsonl", questions)
    write_jsonl(dest / "triples.jsonl", [t for t in _rows(SAMPLE / "triples.jsonl") if t["passage_id"] in keep])
    return questions


def make_runs(root: Path, *, n_passages: int = 150, n_questions: int = 6, hostile: bool = True,
              fail_question: int | None = 2, methods: dict[str, list[str]] | None = None,
              cache: Path | None = None) -> Path:
    """``root/runs/<method>/`` finished runs (qa=true) of ``methods`` on a sample slice; returns ``root/runs``."""
    questions = make_dataset(root / "data", n_passages, n_questions, hostile)
    marker = questions[fail_question]["question"] if fail_question is not None else None
    old = os.environ.get("GEAR_CACHE")
    os.environ["GEAR_CACHE"] = str(cache or root / "cache")
    try:
        base = ["dataset.name=musique", f"dataset.limit={n_questions}", "run.progress=false", "qa=true",
                "embedder=minilm", f"dataset.path={root / 'data'}"]
        for name, overrides in (methods or METHODS).items():
            llm = FailingLLM(marker if overrides[0] == "agent=gear" else None)
            run_with_doubles([*base, *overrides], root / "runs" / name, llm=llm, embedder=HashEmbedder())
            # on the paper's setting, so rows keep their paper labels and cells (tests/test_like_for_like.py covers
            # the explorer's cells of a run apart from it)
            put_on_paper_setting(root / "runs" / name, questions=n_questions)
    finally:
        if old is None:
            os.environ.pop("GEAR_CACHE", None)
        else:
            os.environ["GEAR_CACHE"] = old
    return root / "runs"
