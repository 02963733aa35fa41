#!/usr/bin/env bash
# `convrag eval compare` against SciPy on real run pairs (called by scripts/test.sh):
#   1. TREC DL 2019 passage: the BM25 top-100 candidates vs convrag's all-MiniLM-L6-v2 reranking of
#      them (`convrag rerank`) vs the same with weighted fusion (three runs: Holm over three pairs);
#   2. iKAT 2023 PTKB rankings: the lexical (BM25) ranker vs the learned ranker
#      (`convrag pipeline ptkb`), on the NIST PTKB qrels.
# scripts/compare_scipy.py recomputes the per-topic values with pytrec_eval and the p-values with
# SciPy (pinned, in a virtual environment under ~/.cache/convrag) and fails on any difference.
#
# The two DL19 reranked runs are committed (tests/golden/compare/, gzipped): encoding the 4,300
# passages takes minutes on two cores, and what is checked here is the comparison, not the
# reranker (tests/it/rerank checks that). `--regenerate-runs` writes them again with `convrag rerank`.
#
#   scripts/compare-scipy.sh [--regenerate-runs] [WORK_DIR]
#                          (needs ../shared/data, and for --regenerate-runs ./.convrag from
#                           scripts/fetch-models.sh; builds the debug binary if missing)
set -euo pipefail
cd "$(dirname "$0")/.."

PINS="numpy==2.4.6 scipy==1.17.1 pytrec-eval-terrier==0.5.11"
VENV="${CONVRAG_CACHE:-$HOME/.cache/convrag}/venv-scipy"
if [ "$(cat "$VENV/.pins" 2>/dev/null)" != "$PINS" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet $PINS
    echo "$PINS" > "$VENV/.pins"
fi

BIN="${CONVRAG_BIN:-${CARGO_TARGET_DIR:-target}/debug/convrag}"
[ -x "$BIN" ] || cargo build --locked --bin convrag
regenerate=0
if [ "${1:-}" = "--regenerate-runs" ]; then regenerate=1; shift; fi
W="${1:-$(mktemp -d)}"
GOLDEN=tests/golden/compare
mkdir -p "$W"
D=../shared/data
# A data directory of its own for the reranker's embedding cache (keyed by model checksum; kept
# between runs, so only the first run encodes the 4,300 passages), the shared model and library.
export CONVRAG_HOME="${CONVRAG_CACHE:-$HOME/.cache/convrag}/compare-scipy-home" RUST_LOG=warn
export ORT_DYLIB_PATH="$(ls "$PWD"/.convrag/onnxruntime/libonnxruntime.so* | head -1)"
export CONVRAG_MODEL_DIR="$PWD/.convrag/models/all-MiniLM-L6-v2"

echo "== DL19: BM25 vs all-MiniLM-L6-v2 reranking vs weighted fusion (BM25 weight 0.2)"
CANDS=$D/trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz
QRELS=$D/trec-dl-rerank/qrels.dl19-passage.txt
if [ "$regenerate" -eq 1 ]; then
    "$BIN" rerank --candidates "$CANDS" --output "$W/dl19.minilm.trec" --collection dl19 2>/dev/null
    "$BIN" rerank --candidates "$CANDS" --output "$W/dl19.weighted.trec" --collection dl19 --fusion weighted:0.2 2>/dev/null
    mkdir -p "$GOLDEN"
    gzip -9nc "$W/dl19.minilm.trec" > "$GOLDEN/dl19.minilm.trec.gz"
    gzip -9nc "$W/dl19.weighted.trec" > "$GOLDEN/dl19.weighted.trec.gz"
    echo "compare-scipy: $GOLDEN/dl19.{minilm,weighted}.trec.gz written"
else
    gunzip -c "$GOLDEN/dl19.minilm.trec.gz" > "$W/dl19.minilm.trec"
    gunzip -c "$GOLDEN/dl19.weighted.trec.gz" > "$W/dl19.weighted.trec"
fi
"$BIN" eval compare --qrels "$QRELS" -l 2 --run "$CANDS" --run "$W/dl19.minilm.trec" --run "$W/dl19.weighted.trec" \
    -m ndcg_cut.10 -m map -m recip_rank -m recall.10 -m recall.100 --permutations 100000 \
    --json "$W/dl19.compare.json" --html "$W/dl19.compare.html"
"$VENV/bin/python" scripts/compare_scipy.py ranking "$QRELS" 2 "$W/dl19.compare.json" \
    "$CANDS" "$W/dl19.minilm.trec" "$W/dl19.weighted.trec"

echo "== iKAT 2023 PTKB: lexical vs learned ranker (NIST PTKB qrels)"
TOPICS=$D/ikat/official/2023_test_topics.json
PTKB_QRELS=$D/ikat/qrels/2023_ptkb_qrels_nist.txt
"$BIN" pipeline ptkb --topics "$TOPICS" --list all --output "$W/ptkb.lexical.json"
"$BIN" pipeline ptkb --topics "$TOPICS" --list all --learned --output "$W/ptkb.learned.json"
"$BIN" eval compare-ptkb --qrels "$PTKB_QRELS" --run "$W/ptkb.lexical.json" --run "$W/ptkb.learned.json" \
    -m ndcg_cut.3 -m recip_rank -m P.1 --permutations 100000 --json "$W/ptkb.compare.json"
"$VENV/bin/python" scripts/compare_scipy.py ptkb "$PTKB_QRELS" 1 "$W/ptkb.compare.json" \
    "$W/ptkb.lexical.json" "$W/ptkb.learned.json"
