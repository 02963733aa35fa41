#!/usr/bin/env bash
# BM25 at growing scale, convrag and Anserini side by side in one run (issue 15): for each size,
# a synthetic MS MARCO v2.1 segment corpus (examples/gen_corpus.rs), indexing time, peak memory
# and bytes of both engines, then top-k latency at k = 10 and 1000 on the 344 real queries
# (43 DL19 + 301 TREC RAG 2024 topics): convrag pruned and exhaustive (identical rankings
# checked, examples/topk_latency.rs) and Anserini (scripts/BenchLatency.java).
#
# Usage: scripts/bench-growth.sh WORKDIR [SIZES="1000000 3000000 10000000"]
# Needs: cargo build --release --locked --bin convrag --example topk_latency --example gen_corpus,
# Java 17, pip install --no-deps pyserini==0.22.1 (Anserini's fat jar), /usr/bin/time.
# Corpora and convrag indexes are kept in WORKDIR and reused (delete them to re-measure); each
# Anserini index is removed after its size is measured, to bound the disk used.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$1
SIZES=${2:-"1000000 3000000 10000000"}
BIN=${CARGO_TARGET_DIR:-$HERE/../target}/release
DATA=${DATA:-$HERE/../../shared/data}
JAR=$(python3 -c "import pyserini,os,glob;print(glob.glob(os.path.dirname(pyserini.__file__)+'/resources/jars/anserini-*-fatjar.jar')[0])")
mkdir -p "$W/jcls"
cat "$DATA/trec-dl-rerank/topics.dl19-passage.txt" "$DATA/trec-rag/rag24/topics.rag24.test.txt" > "$W/topics.tsv"
javac -cp "$JAR" -d "$W/jcls" "$HERE/BenchLatency.java"
export RUST_LOG=warn
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%FT%TZ)"

for n in $SIZES; do
  c="$W/corpus$n"
  shards=$(( (n + 99999) / 100000 ))
  /usr/bin/time -f "generate $n: %e s" "$BIN/examples/gen_corpus" "$c" "$n" "$shards" "$DATA" 2>&1 | grep -E "generate|vocabulary"
  echo "== $n segments: $(cat "$c"/v21/*.json.gz | wc -c) bytes gzipped JSON (v2.1 layout)"
  name=g$n
  if [ ! -f "$W/home/collections/$name/manifest.sha256.json" ]; then
    /usr/bin/time -v "$BIN/convrag" --home "$W/home" index --collection "$name" \
      --format msmarco-v2.1-segmented --threads 2 --heap-mb 1024 --quiet "$c/v21" 2> "$W/convrag.$n.log"
  fi
  grep -E "passages added|Elapsed|Maximum resident" "$W/convrag.$n.log" | sed 's/^\s*/convrag index: /'
  du -sb "$W/home/collections/$name" | awk -v n="$n" '{printf "convrag index bytes: %d (%.1f per segment)\n", $1, $1/n}'
  du -sb "$W/home/collections/$name/impacts" | awk '{printf "  of which impacts: %d\n", $1}'
  for k in 10 1000; do
    "$BIN/examples/topk_latency" "$W/home/collections/$name" "$W/topics.tsv" $k | sed "s/^/convrag k=$k: /"
  done

  rm -rf "$W/anserini.idx"
  /usr/bin/time -v java -cp "$JAR" io.anserini.index.IndexCollection -collection JsonCollection \
    -input "$c/jsonl" -index "$W/anserini.idx" -generator DefaultLuceneDocumentGenerator \
    -threads 2 -storeRaw > "$W/anserini.$n.log" 2>&1
  grep -E "Total .* documents indexed|Elapsed|Maximum resident" "$W/anserini.$n.log" | sed 's/^\s*/anserini index: /'
  du -sb "$W/anserini.idx" | awk -v n="$n" '{printf "anserini index bytes: %d (%.1f per segment, raw JSON stored)\n", $1, $1/n}'
  for k in 10 1000; do
    java -cp "$JAR:$W/jcls" BenchLatency "$W/anserini.idx" "$W/topics.tsv" $k 2>/dev/null | sed 's/^/anserini /'
  done
  rm -rf "$W/anserini.idx"
done
