#!/usr/bin/env bash
# Side-by-side BM25 effectiveness of convrag and Anserini (issue 4) on Cranfield and on the 4,300
# DL19 candidate passages, same files, same queries, k1=0.9 b=0.4, nDCG@10 by pytrec_eval.
#
# Needs: a built convrag (CONVRAG=path, default $CARGO_TARGET_DIR/release/convrag), Java 17,
#   pip install --no-deps pyserini==0.22.1 pytrec-eval-terrier   (for the bundled Anserini jar)
# Usage: scripts/bench-effectiveness.sh [WORKDIR]   (default /tmp/convrag-bench-eff)
# Prints a table; runs and indexes stay in WORKDIR.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-/tmp/convrag-bench-eff}
CONVRAG=${CONVRAG:-${CARGO_TARGET_DIR:-$HERE/../target}/release/convrag}
JAR=$(python3 -c "import pyserini,os,glob;print(glob.glob(os.path.dirname(pyserini.__file__)+'/resources/jars/anserini-*-fatjar.jar')[0])")
DATA=$HERE/../../shared/data
mkdir -p "$W"
python3 "$HERE/bench_prepare.py" "$W"
export RUST_LOG=warn
for c in cran dl19; do
  rm -rf "$W/$c/home" "$W/$c/anserini.idx"
  case $c in
    cran) "$CONVRAG" --home "$W/$c/home" index --collection $c --format smart --quiet "$DATA/classic-ir/cranfield/cran.all.1400" ;;
    dl19) "$CONVRAG" --home "$W/$c/home" index --collection $c --format trec-dl-candidates --quiet "$DATA/trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz" ;;
  esac
  "$CONVRAG" --home "$W/$c/home" search --collection $c --topics "$W/$c/topics.tsv" --k 1000 --output "$W/$c/run.convrag.txt"
  java -cp "$JAR" io.anserini.index.IndexCollection -collection JsonCollection -input "$W/$c/docs" \
    -index "$W/$c/anserini.idx" -generator DefaultLuceneDocumentGenerator -threads 2 > "$W/$c/anserini.index.log" 2>&1
  java -cp "$JAR" io.anserini.search.SearchCollection -index "$W/$c/anserini.idx" -topics "$W/$c/topics.tsv" \
    -topicreader TsvString -output "$W/$c/run.anserini.txt" -bm25 -bm25.k1 0.9 -bm25.b 0.4 -hits 1000 > "$W/$c/anserini.search.log" 2>&1
done
echo "| collection | qrels | measure | convrag | Anserini 0.22.1 |"
echo "|---|---|---|---|---|"
for q in qrels.txt qrels.inverted.txt; do
  for m in ndcg_cut.10 map recall.1000; do
    a=$(python3 "$HERE/bench_eval.py" "$W/cran/run.anserini.txt" "$W/cran/$q" $m | cut -f2)
    b=$(python3 "$HERE/bench_eval.py" "$W/cran/run.convrag.txt" "$W/cran/$q" $m | cut -f2)
    echo "| Cranfield | $q | $m | $b | $a |"
  done
done
for m in ndcg_cut.10 map recall.100; do
  a=$(python3 "$HERE/bench_eval.py" "$W/dl19/run.anserini.txt" "$W/dl19/qrels.txt" $m --rel 2 | cut -f2)
  b=$(python3 "$HERE/bench_eval.py" "$W/dl19/run.convrag.txt" "$W/dl19/qrels.txt" $m --rel 2 | cut -f2)
  echo "| DL19 4,300 candidates | qrels.dl19-passage (rel>=2 binary) | $m | $b | $a |"
done
python3 - "$W" <<'PY'
import sys
from collections import defaultdict
w = sys.argv[1]
for c in ["cran", "dl19"]:
    def load(p):
        r = defaultdict(list)
        for l in open(p):
            q, _, d, rank, s, _ = l.split()
            r[q].append((d, float(s)))
        return r
    a, b = load(f"{w}/{c}/run.anserini.txt"), load(f"{w}/{c}/run.convrag.txt")
    same = sum(1 for q in a if [d for d, _ in a[q][:10]] == [d for d, _ in b[q][:10]])
    diff = max((abs(s - dict(b[q]).get(d, s)) for q in a for d, s in a[q][:10]), default=0)
    print(f"{c}: identical top-10 on {same}/{len(a)} queries; max |score diff| in Anserini's top 10 = {diff:.4f}")
PY
