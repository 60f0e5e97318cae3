#!/usr/bin/env bash
# Fetch the paper's evaluation data on a machine with internet access, then convert it with
# gear-repro-prepare into data/prepared/<name>/ (see docs/data.md).
#
#   musique_ircot   IRCoT MuSiQue: 500 test questions; full corpus (139,416 passages) built as IRCoT's
#                   retriever_server/build_index.py does: all paragraphs of MuSiQue ans+full train/dev/test,
#                   de-duplicated by (title, text)
#   2wiki_ircot     IRCoT 2WikiMultihopQA: 500 test questions; full corpus (430,225 passages) = all context
#                   paragraphs of 2Wiki train/dev/test, sentences joined with spaces, de-duplicated
#   hotpotqa_hipporag  HippoRAG (v1) HotpotQA: 1,000 questions, 9,221 passages
#
# Needs: curl, unzip, python3 and gdown (pip install gdown) for the Google Drive files.
# Google Drive sometimes refuses large downloads (quota); if gdown fails, download the file in a browser
# from the printed address and put it at the printed path, then rerun (finished steps are skipped).
# Usage: scripts/download_data.sh [musique_ircot] [2wiki_ircot] [hotpotqa_hipporag]   (default: all)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
RAW="${RAW:-data/raw}"
OUT="${OUT:-data/prepared}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON="python3"
PREPARE=("$PYTHON" -m gear_repro.cli.prepare)

# Release locations (as published by the IRCoT and HippoRAG authors; override if they move).
IRCOT_PROCESSED_GDRIVE_ID="${IRCOT_PROCESSED_GDRIVE_ID:-1t2BjJtsejSIUZI54PKObMFG6_wMMG3bC}"  # IRCoT download/processed_data.sh
MUSIQUE_RAW_GDRIVE_ID="${MUSIQUE_RAW_GDRIVE_ID:-1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h}"          # IRCoT download/raw_data.sh
TWOWIKI_RAW_URL="${TWOWIKI_RAW_URL:-https://www.dropbox.com/s/7ep3h8unu2njfxv/data_ids.zip?dl=1}"  # IRCoT download/raw_data.sh
HIPPORAG_REV="${HIPPORAG_REV:-b144c46df14cabe5f5822d8caded4bec5f709461}"                      # HippoRAG v1 data/ folder
HIPPORAG_DATA_URL="${HIPPORAG_DATA_URL:-https://raw.githubusercontent.com/OSU-NLP-Group/HippoRAG/$HIPPORAG_REV/data}"

say() { echo "== $*"; }
die() { echo "error: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is required ($2)"; }

gdrive() {  # gdrive ID DEST
  [[ -s "$2" ]] && { say "have $2"; return; }
  need gdown "pip install gdown"
  say "downloading https://drive.google.com/file/d/$1 -> $2"
  mkdir -p "$(dirname "$2")"
  gdown "$1" -O "$2.part" || die "gdown failed; download https://drive.google.com/file/d/$1 by hand to $2"
  mv "$2.part" "$2"
}

fetch() {  # fetch URL DEST
  [[ -s "$2" ]] && { say "have $2"; return; }
  need curl "for downloads"
  say "downloading $1 -> $2"
  mkdir -p "$(dirname "$2")"
  curl -fL --retry 3 -o "$2.part" "$1" || die "download failed: $1"
  mv "$2.part" "$2"
}

ircot_processed() {
  gdrive "$IRCOT_PROCESSED_GDRIVE_ID" "$RAW/ircot/processed_data.zip"
  if [[ ! -d "$RAW/ircot/processed_data" ]]; then
    need unzip "to unpack the archives"
    unzip -q -o "$RAW/ircot/processed_data.zip" -d "$RAW/ircot" -x "*.DS_Store"
  fi
}

# Build a corpus file [{title, text}] from raw question files, as IRCoT's build_index.py does.
build_corpus() {  # build_corpus KIND OUT FILE...
  local kind="$1" out="$2"; shift 2
  [[ -s "$out" ]] && { say "have $out"; return; }
  say "building $out from $*"
  "$PYTHON" - "$kind" "$out" "$@" <<'PY'
import json, sys
kind, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
seen, corpus = set(), []
def add(title, text):
    if (title, text) not in seen:
        seen.add((title, text)); corpus.append({"title": title, "text": text})
for f in files:
    if kind == "musique":
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    for p in json.loads(line)["paragraphs"]:
                        add(p["title"], p["paragraph_text"])
    else:
        with open(f, encoding="utf-8") as fh:
            for rec in json.load(fh):
                for title, sents in rec["context"]:
                    add(title, " ".join(sents))
with open(out + ".part", "w", encoding="utf-8") as fh:
    json.dump(corpus, fh, ensure_ascii=False)
import os; os.replace(out + ".part", out)
print(f"{out}: {len(corpus)} passages")
PY
}

check_count() {  # check_count DIR EXPECTED_PASSAGES EXPECTED_QUESTIONS
  local n q
  n=$(wc -l < "$1/corpus.jsonl"); q=$(wc -l < "$1/questions.jsonl")
  [[ "$n" -eq "$2" && "$q" -eq "$3" ]] || echo "warning: $1 has $n passages / $q questions; the paper setup has $2 / $3" >&2
}

musique_ircot() {
  ircot_processed
  gdrive "$MUSIQUE_RAW_GDRIVE_ID" "$RAW/musique/musique_v1.0.zip"
  local m="$RAW/musique"
  [[ -s "$m/musique_ans_v1.0_train.jsonl" ]] || unzip -q -jo "$m/musique_v1.0.zip" -d "$m" -x "*.DS_Store"
  build_corpus musique "$m/ircot_corpus.json" \
    "$m/musique_ans_v1.0_dev.jsonl" "$m/musique_ans_v1.0_test.jsonl" "$m/musique_ans_v1.0_train.jsonl" \
    "$m/musique_full_v1.0_dev.jsonl" "$m/musique_full_v1.0_test.jsonl" "$m/musique_full_v1.0_train.jsonl"
  "${PREPARE[@]}" --format ircot --dataset musique \
    --questions "$RAW/ircot/processed_data/musique/test_subsampled.jsonl" \
    --corpus "$m/ircot_corpus.json" --out "$OUT/musique_ircot"
  check_count "$OUT/musique_ircot" 139416 500
}

twowiki_ircot() {
  ircot_processed
  fetch "$TWOWIKI_RAW_URL" "$RAW/2wikimultihopqa/data_ids.zip"
  local w="$RAW/2wikimultihopqa"
  [[ -s "$w/train.json" ]] || unzip -q -jo "$w/data_ids.zip" -d "$w" -x "*.DS_Store"
  build_corpus 2wiki "$w/ircot_corpus.json" "$w/train.json" "$w/dev.json" "$w/test.json"
  "${PREPARE[@]}" --format ircot --dataset 2wikimultihopqa \
    --questions "$RAW/ircot/processed_data/2wikimultihopqa/test_subsampled.jsonl" \
    --corpus "$w/ircot_corpus.json" --out "$OUT/2wiki_ircot"
  check_count "$OUT/2wiki_ircot" 430225 500
}

hotpotqa_hipporag() {
  local h="$RAW/hipporag"
  fetch "$HIPPORAG_DATA_URL/hotpotqa.json" "$h/hotpotqa.json"
  fetch "$HIPPORAG_DATA_URL/hotpotqa_corpus.json" "$h/hotpotqa_corpus.json"
  "${PREPARE[@]}" --format hipporag --dataset hotpotqa --questions "$h/hotpotqa.json" \
    --corpus "$h/hotpotqa_corpus.json" \
    --out "$OUT/hotpotqa_hipporag"
  check_count "$OUT/hotpotqa_hipporag" 9221 1000
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(musique_ircot 2wiki_ircot hotpotqa_hipporag)
for t in "${targets[@]}"; do
  case "$t" in
    musique_ircot) musique_ircot ;;
    2wiki_ircot) twowiki_ircot ;;
    hotpotqa_hipporag) hotpotqa_hipporag ;;
    *) die "unknown target '$t' (musique_ircot, 2wiki_ircot, hotpotqa_hipporag)" ;;
  esac
done
say "done: prepared folders are in $OUT/"
