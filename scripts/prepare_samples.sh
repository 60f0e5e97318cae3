#!/usr/bin/env bash
# Prepare the offline 2Wiki and HotpotQA samples into data/prepared/ (gitignored).
# Usage: scripts/prepare_samples.sh            (SHARED_DATA defaults to ../shared/data from the repo root)
#        SHARED_DATA=/path/to/data scripts/prepare_samples.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
SHARED_DATA="${SHARED_DATA:-../shared/data}"
OUT="${OUT:-data/prepared}"
PREPARE="${PREPARE:-$REPO/.venv/bin/gear-repro-prepare}"
[[ -x "$PREPARE" ]] || PREPARE="gear-repro-prepare"

if [[ ! -d "$SHARED_DATA" ]]; then
  echo "error: shared data folder not found: $SHARED_DATA (set SHARED_DATA=...)" >&2
  exit 1
fi

echo "== 2WikiMultihopQA sample (HippoRAG form: evidence triples, gold from evidence subjects)"
"$PREPARE" --format 2wiki_hipporag \
  --questions "$SHARED_DATA/2wiki_sample/2wikimultihopqa_questions_300.json" \
  --corpus "$SHARED_DATA/2wiki_sample/2wikimultihopqa_corpus.json" \
  --out "$OUT/2wiki_sample"

echo "== HotpotQA sample (native; corpus = union of the questions' contexts)"
"$PREPARE" --format hotpotqa \
  --questions "$SHARED_DATA/hotpotqa_sample/hotpotqa_train_25.json" \
  --out "$OUT/hotpotqa_sample"
