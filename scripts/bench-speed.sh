#!/usr/bin/env bash
# Side-by-side BM25 indexing and query speed of convrag and Anserini (issue 4) on a synthetic
# MS MARCO v2.1 segment corpus (scripts/bench-gen-corpus.py), same machine, same text.
#
# Usage: scripts/bench-speed.sh CORPUS_DIR [WORKDIR]
#   CORPUS_DIR holds v21/*.json.gz (convrag) and jsonl/*.jsonl.gz (Anserini), as written by
#   python3 scripts/bench-gen-corpus.py CORPUS_DIR 1000000 10
# Needs a release convrag (CONVRAG=path, default $CARGO_TARGET_DIR/release/convrag), Java 17 and
# pip install --no-deps pyserini==0.22.1 (for the Anserini fat jar), /usr/bin/time.
# Queries: the 43 DL19 topics and the 301 TREC RAG 2024 topics (real queries), k=10 and k=1000.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
C=$1
W=${2:-/tmp/convrag-bench-speed}
THREADS=${THREADS:-$(nproc)}
CONVRAG=${CONVRAG:-${CARGO_TARGET_DIR:-$HERE/../target}/release/convrag}
JAR=$(python3 -c "import pyserini,os,glob;print(glob.glob(os.path.dirname(pyserini.__file__)+'/resources/jars/anserini-*-fatjar.jar')[0])")
DATA=$HERE/../../shared/data
mkdir -p "$W/jcls"
rm -rf "$W/home" "$W/anserini.idx"
cat "$DATA/trec-dl-rerank/topics.dl19-passage.txt" "$DATA/trec-rag/rag24/topics.rag24.test.txt" > "$W/topics.tsv"
SEGS=$(zcat "$C"/v21/*.json.gz | wc -l)
RAW=$(zcat "$C"/v21/*.json.gz | wc -c)
GZ=$(cat "$C"/v21/*.json.gz | wc -c)
echo "corpus: $SEGS segments, $RAW bytes JSON ($GZ gzipped); threads $THREADS"

export RUST_LOG=warn
/usr/bin/time -v "$CONVRAG" --home "$W/home" index --collection speed --format msmarco-v2.1-segmented \
  --threads "$THREADS" --heap-mb 1024 --quiet "$C/v21" 2> "$W/convrag.index.log"
grep -E "passages added|Elapsed|Maximum resident" "$W/convrag.index.log"
du -sb "$W/home/collections/speed" | awk -v n="$SEGS" '{printf "convrag index: %d bytes, %.1f bytes/segment\n", $1, $1/n}'
for k in 10 1000; do
  "$CONVRAG" --home "$W/home" search --collection speed --topics "$W/topics.tsv" --k $k --timing \
    --output "$W/run.convrag.k$k.txt" 2>&1 | grep latency
done

/usr/bin/time -v java -cp "$JAR" io.anserini.index.IndexCollection -collection JsonCollection -input "$C/jsonl" \
  -index "$W/anserini.idx" -generator DefaultLuceneDocumentGenerator -threads "$THREADS" -storeRaw > "$W/anserini.index.log" 2>&1
grep -E "documents indexed|Elapsed|Maximum resident" "$W/anserini.index.log"
du -sb "$W/anserini.idx" | awk -v n="$SEGS" '{printf "anserini index: %d bytes, %.1f bytes/segment (raw JSON stored)\n", $1, $1/n}'
javac -cp "$JAR" -d "$W/jcls" "$HERE/BenchLatency.java"
for k in 10 1000; do
  java -cp "$JAR:$W/jcls" BenchLatency "$W/anserini.idx" "$W/topics.tsv" $k 2>/dev/null | grep latency
done
