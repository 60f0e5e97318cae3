"""Each method's start-up capacity estimate on one prepared corpus, and the setting that makes it fit a machine
(docs/scale.md, "Every method at 2Wiki's size: the start-up check's estimates").

    python scripts/estimate_methods.py PREPARED [--memory-gib 20] [OVERRIDES...]

For each method of the paper's tables (:data:`METHODS`, the runs of ``scripts/fullsize_rehearsal.sh``), the plan
of ``gear-repro-plan dataset.path=PREPARED <method> OVERRIDES`` (:mod:`gear_repro.pipeline.plan`): the rows each
collection embeds, disk and memory as the start-up check counts them (``pipeline/capacity.py``, nothing cached),
with ``backend.dense_dtype`` float32 and float16, and the first of these that fits in ``--memory-gib`` with the
check's 10 % margin: the run as it is, float16, or float16 with a setting the check names when it refuses
(``capacity_hints``). The corpus is read once (the plan caches it); the counts are of its own triples.
"""

from __future__ import annotations

import argparse
import sys

# name -> (label, overrides): the runs of scripts/fullsize_rehearsal.sh, and the single-step rows before them
METHODS: dict[str, tuple[str, tuple[str, ...]]] = {
    "bm25": ("BM25", ("retriever=bm25",)),
    "sbert": ("SBERT", ("retriever=sbert",)),
    "hybrid": ("Hybrid", ("retriever=hybrid",)),
    "bm25_naive_fast": ("BM25 + NaiveGE", ("retriever=bm25", "expansion=naive")),
    "ircot_bm25": ("IRCoT (BM25)", ("agent=ircot", "retriever=bm25")),
    "hybrid_syncge": ("Hybrid + SyncGE", ("retriever=hybrid", "expansion=sync")),
    "gear_hybrid": ("GEAR (Hybrid)", ("agent=gear", "retriever=hybrid")),
    "t2rag": ("T²RAG", ("agent=t2rag",)),
    "hipporag": ("HippoRAG v1", ("agent=hipporag",)),
    "hipporag_ircot": ("HippoRAG w/ IRCoT", ("agent=hipporag_ircot",)),
    "griever": ("GRIEVER", ("retriever=griever",)),
    "hipporag_v2": ("HippoRAG 2", ("agent=hipporag", "hipporag.version=v2")),
}

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prepared", help="a prepared folder (questions.jsonl, corpus.jsonl, triples.jsonl)")
    ap.add_argument("--memory-gib", type=float, default=20.0, help="the machine's available memory (default 20)")
    ap.add_argument("overrides", nargs="*", help="overrides of every run (e.g. embedder=minilm)")
    args = ap.parse_args()

    from gear_repro.api import compose
    from gear_repro.pipeline.capacity import GIB, MARGIN
    from gear_repro.pipeline.plan import plan_sweep

    base = ["dataset=musique", f"dataset.path={args.prepared}", *args.overrides]
    print(f"| method | rows embedded | disk GiB | memory GiB, float32 / float16 | fits in {args.memory_gib:g} GiB "
          "with |\n|---|---|---|---|---|")
    for label, overrides in METHODS.values():
        runs = plan_sweep(label, [*base, *overrides, "backend.dense_dtype=float32,float16"], compose).runs
        f32, f16 = runs
        if f32.memory is None:
            print(f"| {label} | — | — | — (embeds nothing) | as it is |")
            continue
        fits = [("as it is", f32.memory), ("`backend.dense_dtype=float16`", f16.memory)]
        # the settings the check names as overrides ("hipporag.synonyms=false", not "a higher ..."): each, then all
        named = [first for h in f16.hints if "=" in (first := h.split(" ", 1)[0])]
        for settings in [[s] for s in named] + ([named] if len(named) > 1 else []):
            again = plan_sweep(label, [*base, *overrides, "backend.dense_dtype=float16", *settings], compose).runs[0]
            fits.append((f"`backend.dense_dtype=float16 {' '.join(settings)}` ({again.memory / GIB:.1f} GiB)",
                         again.memory))
        fit = next((how for how, need in fits if need * MARGIN <= args.memory_gib * GIB),
                   "nothing: the check refuses (" + (", ".join(named) or "no setting")
                   + " named)")
        rows = ", ".join(f"{e.collection} {e.rows:,}" for e in f32.encodes)
        print(f"| {label} | {rows} | {f32.disk / GIB:.1f} | {f32.memory / GIB:.1f} / {f16.memory / GIB:.1f} | {fit} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
