#!/usr/bin/env bash
# The measurements of BENCHMARKS.md "Neural reranking", in one place.
#
#   scripts/fetch-models.sh && cargo build --release
#   scripts/rerank-bench.sh [CONVRAG_BINARY] [OUT_DIR]       (defaults: target/release/convrag, ./artifacts/rerank)
#
# Writes runs and logs to OUT_DIR and prints the numbers: nDCG@10 on DL19 (BM25, fp32 and int8
# all-MiniLM-L6-v2, fusions), the Python onnxruntime cross-check, padded vs real tokens with and
# without length sorting, cold vs cached latency of reranking 100 candidates, and peak memory.
# Speed against bare onnxruntime: scripts/rerank-speed.py. Python: the venv fetch-models.sh made
# (add tokenizers and pytrec-eval-terrier to it), or PYTHON=...
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-${CARGO_TARGET_DIR:-target}/release/convrag}"
OUT="${2:-artifacts/rerank}"
PY="${PYTHON:-$HOME/.cache/convrag/venv-convert/bin/python}"
HOME_DIR="${CONVRAG_HOME:-./.convrag}"
D=../shared/data/trec-dl-rerank
CANDS=$D/rank_llm_data_bm25_dl19_top100.json.gz
QRELS=$D/qrels.dl19-passage.txt
FP32="$HOME_DIR/models/all-MiniLM-L6-v2"
INT8="$HOME_DIR/models/all-MiniLM-L6-v2-int8"
mkdir -p "$OUT"
export RUST_LOG=warn
# A private data directory for the embedding cache, so "cold" really is cold.
BENCH_HOME="$OUT/home"
rm -rf "$BENCH_HOME"
run() { # run NAME ARGS...: convrag rerank with peak memory, log in OUT/NAME.log
    local name=$1; shift
    /usr/bin/time -f "peak RSS %M KB, wall %e s" "$BIN" --home "$BENCH_HOME" rerank --candidates "$CANDS" \
        --output "$OUT/$name.trec" "$@" 2> "$OUT/$name.log"
    echo "$name: $(grep -h 'reranked\|peak RSS' "$OUT/$name.log" | tr '\n' ' ')"
}

echo "== quality (DL19, 43 queries x 100 BM25 candidates, truncation 256)"
run fp32 --model "$FP32" --collection dl19
run int8 --model "$INT8" --collection dl19
for f in rrf rrf:10 weighted:0.1 weighted:0.2 weighted:0.3 weighted:0.5; do
    run "fp32-${f/:/-}" --model "$FP32" --collection dl19 --fusion "$f"   # cached embeddings: queries only
done
run "int8-rrf" --model "$INT8" --collection dl19 --fusion rrf
"$PY" scripts/rerank-eval.py --bm25-from "$CANDS" "$QRELS" "$OUT"/*.trec

echo "== cross-check against Python onnxruntime (same model, same truncation)"
"$PY" scripts/rerank-crosscheck.py --model "$FP32" --candidates "$CANDS" --qrels "$QRELS" \
    --convrag-run "$OUT/fp32.trec" --python-run "$OUT/python-fp32.trec.txt" --reuse

echo "== padding: first 10 queries, batch 16, with and without length sorting"
"$PY" - "$CANDS" "$OUT/first10.json" <<'EOF'
import gzip, json, sys
json.dump(json.load(gzip.open(sys.argv[1], "rt"))[:10], open(sys.argv[2], "w"))
EOF
for mode in sorted unsorted; do
    extra=(); [ $mode = unsorted ] && extra=(--no-length-sort)
    "$BIN" --home "$BENCH_HOME" rerank --model "$FP32" --candidates "$OUT/first10.json" \
        --output "$OUT/pad-$mode.trec" "${extra[@]}" 2> "$OUT/pad-$mode.log"
    echo "$mode: $(grep reranked "$OUT/pad-$mode.log")"
done

echo "== latency of reranking 100 candidates (one query), cold then cached"
"$PY" - "$CANDS" "$OUT/one.json" <<'EOF'
import gzip, json, sys
json.dump(json.load(gzip.open(sys.argv[1], "rt"))[:1], open(sys.argv[2], "w"))
EOF
for i in cold cached cached2; do
    "$BIN" --home "$BENCH_HOME" rerank --model "$FP32" --candidates "$OUT/one.json" \
        --output "$OUT/one-$i.trec" --collection latency 2> "$OUT/one-$i.log"
    echo "$i: $(grep reranked "$OUT/one-$i.log")"
done
