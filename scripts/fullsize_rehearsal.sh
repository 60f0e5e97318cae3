#!/usr/bin/env bash
# Full-size dress rehearsal (docs/scale.md, "Full-size dress rehearsal"): a MuSiQue-size corpus grown from the
# bundled sample (scripts/make_fullsize_corpus.py), then the user's commands unchanged: gear-repro-prepare,
# stage=index (with a kill -9 in the middle of the triple encode and the same command again), BM25 / SBERT /
# Hybrid / BM25+NaiveGE (beam=fast on the 100 questions, the exact scorer on 20) / GRIEVER, the report.
# METHODS=1 then runs every method of the paper's tables (docs/scale.md, "Every method at full size"): HippoRAG,
# HippoRAG w/ IRCoT, IRCoT (BM25), Hybrid+SyncGE, GEAR (Hybrid), T²RAG, GRIEVER, their LLM calls answered by the
# stand-in endpoint (tests/helpers/standin_server.py, its own process on a free port, stopped on exit);
# METHODS=only runs these instead of the retrieval runs above (the corpus, prepare and stage=index still first).
# Per stage: OUT/<stage>.log (its output), OUT/<stage>.time (/usr/bin/time -v: wall time, peak RSS),
# OUT/<stage>.du (bytes under the cache and the stage's folder after it), one line per stage in OUT/stages.tsv.
#
# Usage: scripts/fullsize_rehearsal.sh      (OUT defaults to outputs/fullsize; runs the code of HEAD, copied to
#        OUT/code, so edits made meanwhile do not reach it; GEAR_CACHE defaults to OUT/cache)
# Settings (environment): EMBEDDER (minilm), PRECISION (auto), KILL_IN (triples; "" for no kill),
#        KILL_AFTER_PARTS (20; per target: KILL_AFTER_PASSAGES, KILL_AFTER_TRIPLES), KILL_DELAY (25 s),
#        EXTRA (overrides of every run),
#        CHUNKS / TRIPLES (the generator's, default MuSiQue's size), GRIEVER (1: also the GRIEVER run), NICE (5),
#        SHARED_DATA (../shared/data: musique_sample/musique_train_100.json and its OpenIE file),
#        METHODS (0 | 1 | only), LIMIT (questions of each METHODS run; default all)
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/outputs/fullsize}"
PY="${PY:-$REPO/.venv/bin/python}"
EMBEDDER="${EMBEDDER:-minilm}"
PRECISION="${PRECISION:-auto}"
KILL_IN="${KILL_IN-triples}"                # encodes to interrupt with kill -9, in order: passages and/or triples
KILL_AFTER_PARTS="${KILL_AFTER_PARTS:-20}"   # ... once this many of its parts are finished
KILL_DELAY="${KILL_DELAY:-25}"               # ... and this many seconds more (half a part: work the kill loses)
EXTRA="${EXTRA:-}"                           # more overrides for every gear-repro run (e.g. embedder.cache_chunk_rows=N)
NICE="${NICE:-5}"
SHARED_DATA="$(cd "${SHARED_DATA:-$REPO/../shared/data}" && pwd)"   # the sample's native files
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export GEAR_CACHE="${GEAR_CACHE:-$OUT/cache}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

CODE="$OUT/code"
if [[ ! -d "$CODE" ]]; then
  mkdir -p "$CODE" && git -C "$REPO" archive HEAD | tar -x -C "$CODE"
  git -C "$REPO" rev-parse HEAD > "$CODE/COMMIT"
  mkdir -p "$CODE/data" && cp -r "$REPO/data/musique_sample" "$CODE/data/"
fi
export PYTHONPATH="$CODE"
cd "$CODE"

RAW="$OUT/raw"; PREP="$OUT/prepared"; RUNS="$OUT/runs"
COMMON=(dataset=musique "dataset.path=$PREP" "embedder=$EMBEDDER" "embedder.precision=$PRECISION" run.progress=true $EXTRA)

stage() {  # stage NAME FOLDER CMD...: timed, logged, disk measured after it
  local name=$1 folder=$2; shift 2
  echo "== $(date -u +%H:%M:%S) $name: $*" | tee -a "$OUT/rehearsal.log"
  /usr/bin/time -v -o "$OUT/$name.time" nice -n "$NICE" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  du -sb "$GEAR_CACHE" "$folder" 2>/dev/null > "$OUT/$name.du"
  local wall rss
  wall=$(grep "Elapsed (wall" "$OUT/$name.time" | awk '{print $NF}')
  rss=$(grep "Maximum resident" "$OUT/$name.time" | awk '{print $NF}')
  printf "%s\t%s\t%s\t%s\t%s\n" "$name" "$rc" "$wall" "$rss" "$(awk '{printf "%s=%s ", $2, $1}' "$OUT/$name.du")" \
    >> "$OUT/stages.tsv"
  echo "   rc=$rc wall=$wall maxrss_kb=$rss" | tee -a "$OUT/rehearsal.log"
  return $rc
}

parts_of() {  # parts_of passages|triples: finished parts of that collection's encode (plan.json rows tell them apart)
  local want=$1 n_pass d
  n_pass=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['passages'])" "$PREP/prepare_stats.json")
  for d in "$GEAR_CACHE"/embeddings/*.parts; do
    [[ -f "$d/plan.json" ]] || continue
    local rows
    rows=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['rows'])" "$d/plan.json" 2>/dev/null || echo 0)
    if [[ ( $want == passages && $rows == "$n_pass" ) || ( $want == triples && $rows != "$n_pass" ) ]]; then
      ls "$d"/rows-*.npy 2>/dev/null | wc -l
      return
    fi
  done
  echo 0
}

[[ -f "$RAW/openie.json" ]] || stage generate "$RAW" "$PY" scripts/make_fullsize_corpus.py --out "$RAW" --shared "$SHARED_DATA/musique_sample" \
  ${CHUNKS:+--chunks "$CHUNKS"} ${TRIPLES:+--triples "$TRIPLES"}
[[ -f "$PREP/prepare_stats.json" ]] || stage prepare "$PREP" "$PY" -m gear_repro.cli.prepare --format musique \
  --dataset musique --questions "$RAW/questions.json" --corpus "$RAW/corpus.json" \
  --triples-hipporag "$RAW/openie.json" --out "$PREP"

INDEX=("$PY" -m gear_repro.cli.run stage=index "${COMMON[@]}" retriever=hybrid expansion=naive "hydra.run.dir=$RUNS/index")
for target in $KILL_IN; do  # each try killed with -9 once KILL_AFTER_PARTS parts of `target` are written (+ KILL_DELAY s)
  [[ -f "$RUNS/index/metrics.json" || -f "$OUT/killed_in_$target.txt" ]] && continue
  ( stage "index_killed_in_$target" "$RUNS/index" "${INDEX[@]}" ) &
  watcher=$!
  while kill -0 "$watcher" 2>/dev/null; do
    limit_var="KILL_AFTER_${target^^}"
    if (( $(parts_of "$target") >= ${!limit_var:-$KILL_AFTER_PARTS} )); then
      sleep "$KILL_DELAY"
      tpid=$(pgrep -P "$watcher" | head -1)   # /usr/bin/time, whose child is the run (nice execs it)
      pid=$(pgrep -P "$tpid" | head -1)
      bar=$(tr '\r' '\n' < "$OUT/index_killed_in_$target.log" | grep "embedding $target" | tail -1)
      parts=$(parts_of "$target")
      kill -9 "$pid"
      echo "killed pid $pid at $(date -u +%H:%M:%S): $parts $target parts finished; last bar: $bar" \
        | tee "$OUT/killed_in_$target.txt" | tee -a "$OUT/rehearsal.log"
      break
    fi
    sleep 5
  done
  wait "$watcher"
done
[[ -f "$RUNS/index/metrics.json" ]] || stage index "$RUNS/index" "${INDEX[@]}"
grep -h "already encoded" "$OUT"/index*.log 2>/dev/null | tee -a "$OUT/rehearsal.log"

run() {  # run NAME OVERRIDES...: one retrieval run over the 100 questions
  local name=$1; shift
  [[ -f "$RUNS/$name/metrics.json" ]] || stage "$name" "$RUNS/$name" "$PY" -m gear_repro.cli.run "${COMMON[@]}" "$@" \
    "hydra.run.dir=$RUNS/$name"
}
METHODS="${METHODS:-0}"
if [[ $METHODS != only ]]; then
  run bm25 retriever=bm25
  run sbert retriever=sbert
  run hybrid retriever=hybrid
  run bm25_naive_fast retriever=bm25 expansion=naive beam=fast
  run bm25_naive_exact20 retriever=bm25 expansion=naive dataset.limit=20
  [[ "${GRIEVER:-1}" == 1 ]] && run griever retriever=griever
fi
if [[ $METHODS != 0 ]]; then
  # the stand-in prints its URL (a free port) first; its replies take 2 ms, so the runs time the harness, not a model
  rm -f "$OUT/standin.url"   # a rerun's server writes it anew: never read the URL of a server that has stopped
  nice -n "$NICE" "$PY" -m tests.helpers.standin_server --latency 0.002 > "$OUT/standin.url" 2> "$OUT/standin.log" &
  STANDIN_PID=$!
  trap 'kill "$STANDIN_PID" 2>/dev/null' EXIT
  for _ in $(seq 120); do [[ -s "$OUT/standin.url" ]] && break; sleep 0.5; done
  URL=$(head -1 "$OUT/standin.url")
  [[ $URL == http* ]] || { echo "the stand-in endpoint did not start (OUT/standin.log)" >&2; exit 1; }
  export STANDIN_API_KEY=not-a-key   # a variable of its own: a real OPENAI_API_KEY never reaches the stand-in
  LLM=(llm=openai_compatible "llm.base_url=$URL" llm.model=standin llm.api_key_env=STANDIN_API_KEY
       ${LIMIT:+dataset.limit=$LIMIT})
  # the methods that reuse stage=index's vectors first; HippoRAG and GRIEVER encode their own phrases / names first
  run ircot_bm25 agent=ircot retriever=bm25 "${LLM[@]}"
  run hybrid_syncge retriever=hybrid expansion=sync "${LLM[@]}"
  run gear_hybrid agent=gear retriever=hybrid "${LLM[@]}"
  run t2rag agent=t2rag "${LLM[@]}"
  run hipporag agent=hipporag "${LLM[@]}"
  run hipporag_ircot agent=hipporag_ircot "${LLM[@]}"
  run griever retriever=griever ${LIMIT:+dataset.limit=$LIMIT}
fi
stage report "$OUT/report" "$PY" -m gear_repro.cli.report "$RUNS" --out "$OUT/report"
echo "== $(date -u +%H:%M:%S) done" | tee -a "$OUT/rehearsal.log"
