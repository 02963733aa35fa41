#!/usr/bin/env bash
# Regenerates tests/golden/cranfield/anserini-bm25-top10.trec: Anserini's BM25 run on Cranfield
# (top 10 per query), the reference `tests/it/index/cranfield.rs` compares convrag's ranking with.
# Not run by CI: it needs Anserini, which is not part of the project.
#
# Needs: Java 17 (Debian's openjdk-17-jdk-headless) and network access to PyPI, from which the
# Anserini 0.22.1 fat jar is taken (`pip install --no-deps pyserini==0.22.1` into a private venv
# under ${CONVRAG_CACHE:-~/.cache/convrag}; Anserini is never copied into the repository).
# Usage: scripts/cranfield-anserini-golden.sh [WORKDIR]   (default /tmp/convrag-cranfield-golden)
#
# Same text and queries as scripts/bench-effectiveness.sh (scripts/bench_prepare.py): one
# JsonCollection document per Cranfield document, contents = title + "\n" + all .W text; queries
# by ordinal 1..225. BM25 k1 = 0.9, b = 0.4, 1000 hits per query, of which the first 10 are kept.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-/tmp/convrag-cranfield-golden}
CACHE=${CONVRAG_CACHE:-$HOME/.cache/convrag}
VENV=$CACHE/venv-pyserini-0.22.1
OUT=$HERE/../tests/golden/cranfield/anserini-bm25-top10.trec

die() { echo "cranfield-anserini-golden: error: $*" >&2; exit 1; }
command -v java >/dev/null || die "java is not installed (apt-get install openjdk-17-jdk-headless)"
java -version 2>&1 | grep -q 'version "17\.' || die "Java 17 is needed, found: $(java -version 2>&1 | head -1)"

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --no-deps pyserini==0.22.1
JAR=$("$VENV/bin/python" -c "import importlib.util,os,glob;d=os.path.dirname(importlib.util.find_spec('pyserini').origin);print(glob.glob(d+'/resources/jars/anserini-0.22.1-fatjar.jar')[0])")

rm -rf "$W"
mkdir -p "$W"
python3 "$HERE/bench_prepare.py" "$W" >/dev/null
java -cp "$JAR" io.anserini.index.IndexCollection -collection JsonCollection -input "$W/cran/docs" \
  -index "$W/cran/anserini.idx" -generator DefaultLuceneDocumentGenerator -threads 1 >"$W/index.log" 2>&1 ||
  die "indexing failed, see $W/index.log"
java -cp "$JAR" io.anserini.search.SearchCollection -index "$W/cran/anserini.idx" -topics "$W/cran/topics.tsv" \
  -topicreader TsvString -output "$W/run.anserini.txt" -bm25 -bm25.k1 0.9 -bm25.b 0.4 -hits 1000 \
  >"$W/search.log" 2>&1 || die "search failed, see $W/search.log"

# Anserini writes the topics in input order, each query's hits by rank.
awk '$4 <= 10' "$W/run.anserini.txt" >"$W/top10.trec"
[ "$(wc -l <"$W/top10.trec")" -eq 2250 ] || die "expected 225 queries x 10 hits in $W/top10.trec"
mkdir -p "$(dirname "$OUT")"
cp "$W/top10.trec" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "cranfield-anserini-golden: wrote $OUT"
