#!/usr/bin/env bash
# Checks `convrag search --retrieval dense` against an exact search in Python onnxruntime on
# Cranfield (scripts/dense-reference.py: same scores to 3 decimals, same top 10 up to reference
# ties), then prints nDCG@10 and recall@100 of bm25, dense and hybrid (`convrag eval ranking`).
#
# Needs: a built convrag (CONVRAG=path, default $CARGO_TARGET_DIR/debug/convrag), the model and
# ONNX Runtime of scripts/fetch-models.sh (CONVRAG_MODEL_DIR, ORT_DYLIB_PATH, default under
# ./.convrag), and a Python with numpy, onnxruntime==1.31.1, tokenizers (PYTHON, default
# ~/.cache/convrag/venv-convert/bin/python, into which `pip install tokenizers`).
# Usage: scripts/dense-crosscheck.sh [WORKDIR]   (default /tmp/convrag-dense-check)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=${1:-/tmp/convrag-dense-check}
CONVRAG=${CONVRAG:-${CARGO_TARGET_DIR:-$HERE/../target}/debug/convrag}
PYTHON=${PYTHON:-$HOME/.cache/convrag/venv-convert/bin/python}
export CONVRAG_MODEL_DIR=${CONVRAG_MODEL_DIR:-$HERE/../.convrag/models/all-MiniLM-L6-v2}
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$HERE/../.convrag/onnxruntime/libonnxruntime.so.1.31.1}
export RUST_LOG=warn
DATA=$HERE/../../shared/data/classic-ir/cranfield

die() { echo "dense-crosscheck: error: $*" >&2; exit 1; }
[ -x "$CONVRAG" ] || die "no convrag binary at $CONVRAG (set CONVRAG)"
"$PYTHON" -c "import numpy, onnxruntime, tokenizers" 2>/dev/null ||
  die "$PYTHON lacks numpy, onnxruntime or tokenizers"

rm -rf "$W"
mkdir -p "$W"
python3 "$HERE/bench_prepare.py" "$W" >/dev/null
# Binary relevance (codes 1..4 relevant): the convention of issue 33's reference figures.
awk '{print $1, 0, $2, ($3 > 0 ? 1 : 0)}' "$DATA/cranqrel" >"$W/cran/qrels.binary.txt"
C="$CONVRAG --home $W/home"
# Indexing computes the passage vectors (the model is installed).
$C index --collection cran --format smart --quiet "$DATA/cran.all.1400"
for mode in bm25 dense hybrid; do
  $C search --collection cran --retrieval $mode --k 1000 --topics "$W/cran/topics.tsv" --output "$W/$mode.trec"
done
"$PYTHON" "$HERE/dense-reference.py" --model "$CONVRAG_MODEL_DIR" --docs "$W/cran/docs/docs.jsonl" \
  --topics "$W/cran/topics.tsv" --k 100 --output "$W/python.dense.trec" --compare "$W/dense.trec"
for qrels in qrels.binary.txt qrels.txt; do
  for run in bm25 dense hybrid python.dense; do
    printf '%s %s: ' "$qrels" "$run"
    $C eval ranking --qrels "$W/cran/$qrels" --run "$W/$run.trec" -m ndcg_cut.10 -m recall.100 | tr '\n' ' '
    echo
  done
done
