#!/usr/bin/env python
"""`make demo`: the whole pipeline on the bundled MuSiQue sample with the embedded defaults.

Each step is the command a user would type; they are printed before they run. Outputs go to
outputs/demo/ (one folder per step) and the paper-layout tables and figures to outputs/demo/report.

  1. base retrievers BM25 / SBERT / hybrid on all 100 questions   (Table 2 rows)
  2. NaiveGE over each base retriever on all 100 questions, GPT-3.5 triples, with the fast path scorer
     (beam=fast with rescore=0, i.e. the cheap `sum` score only; the paper's exact scorer is ~30x slower on
     CPU: `experiment=table2_single_step`)
  3. offline triple extraction (K.1) with the local Qwen2.5-1.5B on DEMO_EXTRACT_PASSAGES passages, compared with GPT-3.5
  4. SyncGE (one pass at base k=15, evaluated at 5/10/15) and the GEAR agent with the local LLM, with QA, on the
     first DEMO_LLM_QUESTIONS questions (one multirun: one process, one model load); GEAR at most DEMO_GEAR_ROUNDS
     rounds (default 2; the paper's MuSiQue setting is 4, App. B.1: each round costs ~1 min of local LLM here)
  5. gear-repro-report --html: tables beside the paper's numbers, figures, and the HTML explorer (its path is printed)

Environment: DEMO_EMBEDDER (default minilm = all-MiniLM-L6-v2, ~8x faster to encode the corpus and triples on
CPU than the paper's all-mpnet-base-v2; `mpnet` for the paper's, after `make install-paper-embedder`),
DEMO_LLM_QUESTIONS (default 1; each question costs 1-4 min of local LLM time on 2 cores),
DEMO_EXTRACT_PASSAGES (default 2), DEMO_GEAR_ROUNDS (default 2), DEMO_OUT (default outputs/demo). Re-running
reuses every cache (indexes, embeddings, LLM replies), so a second `make demo` takes about 20 s.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OUT = Path(os.environ.get("DEMO_OUT", REPO / "outputs" / "demo"))
NQ = int(os.environ.get("DEMO_LLM_QUESTIONS", "1"))
NP = int(os.environ.get("DEMO_EXTRACT_PASSAGES", "2"))
ROUNDS = int(os.environ.get("DEMO_GEAR_ROUNDS", "2"))
EMBEDDER = os.environ.get("DEMO_EMBEDDER", "minilm")


def sh(*args: str) -> None:
    cmd = [str(BIN / args[0]), *args[1:]]
    print(f"\n$ {shlex.join([args[0], *args[1:]])}", flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=REPO)
    print(f"  ({time.time() - t0:.0f} s)", flush=True)


def main() -> None:
    t0 = time.time()
    common = ["dataset=musique_sample", f"embedder={EMBEDDER}", "run.progress=false"]
    sh("gear-repro", "-m", "retriever=bm25,sbert,hybrid", *common, f"hydra.sweep.dir={OUT}/1_base")
    sh("gear-repro", "-m", "retriever=bm25,sbert,hybrid", "expansion=naive", "beam=fast", "beam.scorer_options.rescore=0", *common,
       f"hydra.sweep.dir={OUT}/2_naive")
    sh("gear-repro", "stage=extract", "llm=local", f"dataset.limit_passages={NP}", *common,
       f"hydra.run.dir={OUT}/3_extract")
    if NQ > 0:
        # run.matched_k=false: SyncGE reads the base passages once (k=15) instead of once per k
        sh("gear-repro", "-m", "agent=single,gear", "retriever=hybrid", "expansion=sync", "llm=local", "qa=true",
           "run.matched_k=false", f"dataset.limit={NQ}", f"dataset.max_rounds={ROUNDS}", *common,
           f"hydra.sweep.dir={OUT}/4_llm")
    sh("gear-repro-report", f"{OUT}", "--out", f"{OUT}/report", "--html")  # --html: tables, figures and the explorer
    print(f"\ndemo done in {(time.time() - t0) / 60:.1f} min; tables and figures in {OUT}/report")
    print(f"open the results explorer (a static page, no server): {(OUT / 'report' / 'index.html').resolve().as_uri()}")


if __name__ == "__main__":
    main()
