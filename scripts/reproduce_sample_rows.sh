#!/usr/bin/env bash
# The LLM-free rows of docs/results.md on the bundled MuSiQue sample (all 100 questions, MiniLM): Table 2's base
# retrievers with and without NaiveGE (the paper's exact path scorer), GRIEVER, and the report with the claims.
# Run from the repository root after `make demo` (or make install-test-models); every run resumes.
#
#   bash scripts/reproduce_sample_rows.sh [OUT]     OUT: default outputs/sample_rows
set -euo pipefail
OUT=${1:-outputs/sample_rows}
BIN=${BIN:-.venv/bin}
set -x
"$BIN/gear-repro" -m retriever=bm25,sbert,hybrid expansion=none,naive embedder=minilm embedder.num_threads=1 \
  run.progress=false "hydra.sweep.dir=$OUT/table2"
"$BIN/gear-repro" retriever=griever embedder=minilm run.progress=false "hydra.run.dir=$OUT/griever"
"$BIN/gear-repro-report" "$OUT/table2" "$OUT/griever" --out "$OUT/report" --claims
