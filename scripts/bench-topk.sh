#!/usr/bin/env bash
# Top-k BM25 latency, pruned (block-max MaxScore) vs exhaustive, on synthetic MS MARCO v2.1
# segment collections of 50k and 400k segments (issue 15). Same generator and the same 344 real
# queries (43 DL19 + 301 TREC RAG 2024 topics) as the issue 4 speed benchmark (bench-speed.sh).
#
# Usage: scripts/bench-topk.sh WORKDIR [K=10]
#   Needs python3 with numpy (for scripts/bench-gen-corpus.py) and a release build of the
#   convrag binary and the topk_latency example:
#   cargo build --release --bin convrag --example topk_latency
# WORKDIR/corpus is generated once (400,000 segments in 8 shards of 50,000; the 50k collection is
# shard 00) and reused on later runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$1
K=${2:-10}
BIN=${CARGO_TARGET_DIR:-$HERE/../target}/release
DATA=${DATA:-$HERE/../../shared/data}
mkdir -p "$W"
if [ ! -f "$W/corpus/v21/msmarco_v2.1_doc_segmented_07.json.gz" ]; then
  python3 "$HERE/bench-gen-corpus.py" "$W/corpus" 400000 8
fi
mkdir -p "$W/corpus50k/v21"
ln -sf "$W/corpus/v21/msmarco_v2.1_doc_segmented_00.json.gz" "$W/corpus50k/v21/"
cat "$DATA/trec-dl-rerank/topics.dl19-passage.txt" "$DATA/trec-rag/rag24/topics.rag24.test.txt" > "$W/topics.tsv"

export RUST_LOG=warn
for c in 50k:corpus50k 400k:corpus; do
  name=s${c%%:*}
  if [ ! -f "$W/home/collections/$name/collection.json" ]; then
    "$BIN/convrag" --home "$W/home" index --collection "$name" --format msmarco-v2.1-segmented \
      --threads 2 --heap-mb 1024 --quiet "$W/${c#*:}/v21"
  fi
  echo "== $name"
  "$BIN/examples/topk_latency" "$W/home/collections/$name" "$W/topics.tsv" "$K"
done
