"""GEAR rankings with a deterministic stand-in LLM, for before/after comparisons of refactors.

The stand-in answers every reader/gist prompt with the dataset's own first two triples of the first three
passages shown in the prompt (so replies depend on which passages, in which order, a step reads), says
"not answerable" until round 3, and rewrites the question by appending the object of the last fact shown.
No model is loaded besides the embedder; the run goes through :class:`gear_repro.pipeline.runner.Runner`.

    PYTHONPATH=$PWD python scripts/gear_fake_llm_rankings.py OUT_DIR [hydra overrides...]

writes OUT_DIR/predictions.jsonl (and the runner's other files) and prints one digest line per question.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

from gear_repro.config import register_configs
from gear_repro.llm import LLMReply, TokenLedger
from gear_repro.llm.ledger import active_tags
from gear_repro.utils.paths import config_dir

_TITLE = re.compile(r"^Wikipedia Title: (.*)$", re.MULTILINE)
_TRIPLE = re.compile(r'\("([^"]*)", "([^"]*)", "([^"]*)"\)')
DEFAULTS = ["agent=gear", "embedder=minilm", "retriever=hybrid", "dataset.limit=5", "run.progress=false",
            "embedder.show_progress=false"]


class FakeLLM:
    """Deterministic stand-in with the client's ``chat`` signature (the round: the caller's ``ledger.tags``)."""

    model = "fake"
    concurrency = 1  # the LLM role's attributes (gear_repro/llm/base.py)
    context_window = None
    default_params: dict = {}

    def __init__(self, dataset):
        self.ledger = TokenLedger()
        self.calls = 0
        by_pid: dict[str, list] = {}
        for t in dataset.triples:
            by_pid.setdefault(t.passage_id, []).append(t)
        self.by_title: dict[str, list] = {}
        for p in dataset.passages:
            self.by_title.setdefault(p.title, []).extend(by_pid.get(p.id, []))

    def _reply(self, prompt: str, stage: str, n: int) -> str:
        if stage in ("read", "gist"):
            docs = prompt.split("Now you are given some documents", 1)[-1]
            facts = []
            for title in _TITLE.findall(docs)[:3]:
                facts += [f'("{t.subject}", "{t.predicate}", "{t.object}")' for t in self.by_title.get(title, [])[:2]]
            return ", ".join(facts)
        if stage == "reason":
            return "Answerable: Yes\nAnswer: done" if n >= 3 else "Answerable: No\nWhy: more facts needed."
        if stage == "rewrite":
            q = re.search(r"# Your Task:\nQuestion: (.*)", prompt)
            last = _TRIPLE.findall(prompt.split("# Your Task:", 1)[-1])
            return f"Next Question: {q.group(1) if q else ''} {last[-1][2] if last else ''}".strip()
        return ""

    def chat(self, messages, *, stage: str, **kw) -> LLMReply:
        self.calls += 1
        n = int(active_tags()["round"])
        prompt = "\n".join(str(m["content"]) for m in messages)
        text = self._reply(prompt, stage, n)
        self.ledger.add(stage=stage, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                        cached=False, latency_s=0.0, model=self.model)
        return LLMReply(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                        cached=False, latency_s=0.0, model=self.model)

    def check_ready(self) -> None:
        """Always ready."""

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """Scripted replies: params are not used."""

    def stats(self) -> dict:
        return {"calls": self.calls, "cache_hits": 0, "cache_misses": self.calls, "retries": 0, "failures": 0}

    def close(self) -> None:
        """Nothing to stop."""


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[*DEFAULTS, *argv[1:]])
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    dataset = Resources(cfg).dataset
    Runner(cfg, out, resources=Resources(cfg, dataset=dataset, llm=FakeLLM(dataset))).run()
    for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        per_round = [r.get("ranking", [])[:15] for r in rec.get("rounds", [])]
        blob = json.dumps([rec["rankings"]["final"], per_round])
        print(rec["id"], len(per_round), hashlib.sha1(blob.encode()).hexdigest()[:12], rec.get("error", ""))


if __name__ == "__main__":
    main(sys.argv[1:])
