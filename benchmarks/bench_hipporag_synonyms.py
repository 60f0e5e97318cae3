#!/usr/bin/env python
"""HippoRAG v1 sensitivity to the synonym threshold and the no-entity fallback: R@5/10/15, synonym
edges and the share of phrases with a synonym at ``hipporag.synonym_threshold`` 0.8 / 0.85 / 0.9, each under
``hipporag.no_entity_fallback`` uniform (v1, ``hipporag.py`` 232-233) and retriever (the run's base retriever),
on the MuSiQue sample.

The reference scored synonyms with ColBERTv2's self-normalised MaxSim or Contriever's cosine at 0.8
(HippoRAG legacy ``create_graph.py``, ``setup_hipporag_main_exps.sh``); ours scores them with the run's
embedder (``hipporag.encoder``), whose cosine is on another scale, so the same number admits a different
number of edges. This script shows how much that moves recall.

The query NER comes from one of:
  --ner FILE   cached entities, JSON lines ``{"question": ..., "named_entities": [...]}`` (``id`` optional);
               no LLM is called, a question missing from the file counts as "no entity";
  (no --ner)   the run's LLM through the harness (reply cache included): pass Hydra overrides after ``--``,
               e.g. ``-- llm=openai llm.model=gpt-4o-mini``; ``--write-ner FILE`` keeps the entities for later.

  python -m benchmarks.bench_hipporag_synonyms --ner outputs/ner/musique_sample.jsonl
  python -m benchmarks.bench_hipporag_synonyms --write-ner outputs/ner/musique_sample.jsonl -- llm=openai
Writes outputs/bench/hipporag_synonyms.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
THRESHOLDS = (0.8, 0.85, 0.9)
FALLBACKS = ("uniform", "retriever")
_QUESTION = re.compile(r"Question: (.*)\s*$", re.DOTALL)


class CachedNER:
    """LLM stand-in for the ``ner`` stage only: the cached entities of the question in the prompt."""

    model = "cached-ner"
    concurrency = 1  # the LLM role's attributes (gear_repro/llm/base.py)
    context_window = None
    default_params: dict[str, Any] = {}

    def __init__(self, entities: dict[str, list[str]]) -> None:
        from gear_repro.llm import TokenLedger

        self.entities = entities
        self.ledger = TokenLedger()
        self.calls = 0

    def check_ready(self) -> None:
        """Nothing to start: the entities are read from the file."""

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """The entities are read from the file: params are not used."""

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls, "cache_hits": self.calls, "cache_misses": 0, "retries": 0, "failures": 0}

    def close(self) -> None:
        """Nothing to stop."""

    def chat(self, messages: Sequence[dict], *, stage: str, **_: Any):
        from gear_repro.llm import LLMReply

        if stage != "ner":
            raise RuntimeError(f"--ner answers the query NER only, not stage '{stage}'")
        self.calls += 1
        m = _QUESTION.search(str(messages[-1]["content"]))
        ents = self.entities.get(m.group(1).strip() if m else "", [])
        return LLMReply(text=json.dumps({"named_entities": ents}), prompt_tokens=0, completion_tokens=0,
                        cached=True, latency_s=0.0, model=self.model)


def load_ner(path: Path) -> dict[str, list[str]]:
    """Question text -> entities from a JSON-lines file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[str(row["question"]).strip()] = [str(e) for e in row.get("named_entities", [])]
    return out


def run_threshold(threshold: float, fallback: str, overrides: list[str], run_dir: Path,
                  ner: dict[str, list[str]] | None) -> dict:
    """One HippoRAG run at ``threshold`` and ``fallback``: metrics and the graph's synonym statistics."""
    from hydra import compose, initialize_config_dir

    from gear_repro.config import register_configs, validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.paths import config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["agent=hipporag", "run.progress=false", "run.resume=false",
                                           f"hipporag.synonym_threshold={threshold}",
                                           f"hipporag.no_entity_fallback={fallback}", *overrides])
    cfg = validate(cfg)
    res = Resources(cfg) if ner is None else Resources(cfg, llm=CachedNER(ner))
    metrics = Runner(cfg, run_dir, resources=res).run()
    graph = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["hipporag"]["graph"]
    stats = metrics.get("agent_stats", {})
    return {"threshold": threshold, "fallback": fallback, **{f"R@{k}": metrics[f"recall@{k}"] for k in (5, 10, 15)},
            "synonym_edges": graph["synonym_edges"], "synonym_entries": graph["synonym_entries"],
            "synonym_phrase_share": graph["synonym_phrase_share"], "phrases": graph["phrases"],
            "no_entity_rate": stats.get("hipporag_no_entity_rate"), "n_questions": metrics["n_questions"]}


def write_ner(run_dir: Path, path: Path) -> None:
    """The entities the LLM named in ``run_dir``'s predictions, as a ``--ner`` file."""
    rows = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": r["id"], "question": r["question"],
                                        "named_entities": (r.get("trace") or {}).get("entities", [])}) + "\n"
                            for r in rows), encoding="utf-8")


def table(rows: list[dict]) -> str:
    lines = ["| threshold | no-entity fallback | R@5 | R@10 | R@15 | synonym edges | phrases with a synonym "
             "| no-entity rate |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = "–" if r["no_entity_rate"] is None else f"{100 * r['no_entity_rate']:.1f}%"
        lines.append(f"| {r['threshold']} | {r['fallback']} | {r['R@5']:.1f} | {r['R@10']:.1f} | {r['R@15']:.1f} | "
                     f"{r['synonym_edges']:,} | {100 * r['synonym_phrase_share']:.1f}% of {r['phrases']:,} | {rate} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ner", type=Path, help="cached query entities (JSON lines); no LLM call")
    ap.add_argument("--write-ner", type=Path, help="with the LLM: save its entities here")
    ap.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    ap.add_argument("--fallbacks", nargs="+", default=list(FALLBACKS), choices=FALLBACKS)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "hipporag_synonyms.json")
    ap.add_argument("--run-root", type=Path, default=REPO / "outputs" / "bench" / "hipporag_synonyms")
    a = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ner = load_ner(a.ner) if a.ner else None
    base = ["dataset=musique_sample", "embedder=minilm", *overrides]
    rows = []
    grid = [(thr, fb) for thr in a.thresholds for fb in a.fallbacks]
    for i, (thr, fb) in enumerate(grid):
        run_dir = a.run_root / f"threshold_{thr}_{fb}"
        rows.append(run_threshold(thr, fb, base, run_dir, ner))
        if i == 0 and a.write_ner and ner is None:
            write_ner(run_dir, a.write_ner)
            ner = load_ner(a.write_ner)  # the same entities for every threshold
        print(rows[-1], file=sys.stderr)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"overrides": base, "ner": str(a.ner) if a.ner else "llm", "rows": rows}, indent=2))
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
