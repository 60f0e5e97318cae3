#!/usr/bin/env bash
# The local-LLM rows of docs/results.md ("LLM rows"): every method on the same 20-question stratified subset of the
# bundled MuSiQue sample, with the local Qwen2.5-Coder-1.5B (make install-local-llm) and MiniLM, then one report
# with the paired claims. Run from the repository root after `make demo` (or make install-all). Each run resumes
# (re-running the script skips finished questions; every LLM reply is cached in $GEAR_CACHE), so it can be stopped
# and started again. About 2-3 min per question for GEAR and Hybrid + SyncGE on 2 CPU cores (docs/results.md).
#
#   bash scripts/reproduce_llm_rows.sh [OUT]        OUT: where the run dirs and the report go (default outputs/llm_rows)
#   THREADS=2 bash scripts/reproduce_llm_rows.sh    llama.cpp threads (the same replies either way, docs/llm.md "Threads")
set -euo pipefail
OUT=${1:-outputs/llm_rows}
THREADS=${THREADS:-1}
BIN=${BIN:-.venv/bin}
B=(llm=local "llm.server.n_threads=$THREADS" dataset.subset=stratified dataset.limit=20 embedder=minilm run.progress=false)

run() {  # NAME OVERRIDES...: one run dir OUT/NAME
  local name=$1
  shift
  echo "+ gear-repro ${B[*]} $* hydra.run.dir=$OUT/$name"
  "$BIN/gear-repro" "${B[@]}" "$@" "hydra.run.dir=$OUT/$name"
}

run gear_gistall_20       qa=true agent=gear retriever=hybrid agent.gist_k=null
run sync_hybrid_20        qa=true retriever=hybrid expansion=sync
run ircot_raw_20          qa=true agent=ircot retriever=bm25 +agent.cot_params.max_tokens=128 agent.merge=raw
run ircot_normalised_20   qa=true agent=ircot retriever=bm25 +agent.cot_params.max_tokens=128 agent.merge=normalised
run hipporag_ircot_20     qa=true agent=hipporag_ircot +agent.cot_params.max_tokens=128
run t2rag_code_20         experiment=t2rag_table1
run t2rag_code_k3_20      experiment=t2rag_table1 agent.answer=false qa=true
run qa_gold_20            retriever=bm25 qa=true qa_reader.mode=gold
run qa_none_20            retriever=bm25 qa=true qa_reader.mode=none
run gear_griever_20       qa=true agent=gear retriever=griever_k5
run t4_ircot_hybrid_20    experiment=griever_table4_ircot retriever=hybrid
run t4_ircot_griever_20   experiment=griever_table4_ircot retriever=griever_k5
# HippoRAG (v1) with the local LLM's NER on all 100 questions (docs/results.md, "HippoRAG")
echo "+ gear-repro agent=hipporag llm=local embedder=minilm hydra.run.dir=$OUT/hipporag_100"
"$BIN/gear-repro" agent=hipporag llm=local "llm.server.n_threads=$THREADS" embedder=minilm run.progress=false \
  "hydra.run.dir=$OUT/hipporag_100"
# readings compared in docs/readings.md (not rows of the table)
run gear_gist10_20        qa=true agent=gear retriever=hybrid agent.gist_k=10
run t2rag_paper_20        experiment=t2rag_table1 agent.reading=paper

"$BIN/gear-repro-report" "$OUT"/gear_gistall_20 "$OUT"/sync_hybrid_20 "$OUT"/ircot_raw_20 "$OUT"/ircot_normalised_20 \
  "$OUT"/t2rag_code_20 "$OUT"/t2rag_code_k3_20 "$OUT"/qa_gold_20 "$OUT"/qa_none_20 "$OUT"/hipporag_ircot_20 \
  "$OUT"/gear_griever_20 "$OUT"/t4_ircot_hybrid_20 "$OUT"/t4_ircot_griever_20 --out "$OUT/report" --claims --intersect
