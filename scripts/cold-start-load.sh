#!/usr/bin/env bash
# Cold-start load (issue 33): `convrag serve` on an empty home builds its default collection
# (Cranfield, from ../shared/data) and its passage vectors in the background; once the server
# lists the collection ready with `vectors: ready`, the first 100 turns it ever answers run 8 at
# a time (hybrid retrieval, reranked, extractive answers), then warm runs of bm25 and of hybrid
# side by side. Prints a JSON report (scripts/cold_start_load.py). A benchmark: not part of the
# test command.
#
#   scripts/cold-start-load.sh                       # debug build
#   scripts/cold-start-load.sh --release             # release build
#   scripts/cold-start-load.sh -- --warm-turns 400   # options of scripts/cold_start_load.py
#
# Needs: the models (scripts/fetch-models.sh), a PostgreSQL server to create a scratch database
# in (CONVRAG_BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
die() { echo "cold-start: error: $*" >&2; exit 1; }

profile=debug
if [ "${1:-}" = "--release" ]; then profile=release; shift; fi
[ "${1:-}" = "--" ] && shift

data="${CONVRAG_CRANFIELD:-$root/../shared/data/classic-ir/cranfield}"
[ -f "$data/cran.all.1400" ] || die "no Cranfield at $data (set CONVRAG_CRANFIELD)"
home_models="${CONVRAG_HOME:-$root/.convrag}"
model_dir="${CONVRAG_MODEL_DIR:-$home_models/models/all-MiniLM-L6-v2}"
ort="${ORT_DYLIB_PATH:-$home_models/onnxruntime/libonnxruntime.so.1.31.1}"
[ -f "$model_dir/manifest.json" ] || die "no model at $model_dir (run scripts/fetch-models.sh)"
[ -f "$ort" ] || die "no ONNX Runtime at $ort (run scripts/fetch-models.sh)"

if [ "$profile" = release ]; then
  cargo build --locked --quiet --release --bin convrag
else
  cargo build --locked --quiet --bin convrag
fi
convrag="${CARGO_TARGET_DIR:-$root/target}/$profile/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

admin_url="${CONVRAG_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
db="convrag_cold_start_$$"
psql "$admin_url" -qc "CREATE DATABASE $db" || die "cannot create database $db at $admin_url"
work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-cold-start.XXXXXX")"
cleanup() {
  psql "$admin_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home"

status=0
python3 scripts/cold_start_load.py --binary "$convrag" --home "$work/home" --work "$work" \
  --database-url "${admin_url%/*}/$db" --model-dir "$model_dir" --ort "$ort" --data "$data" \
  "$@" || status=$?
if [ "$status" != 0 ]; then
  tail -n 40 "$work/server.log" >&2 2>/dev/null || true
  die "cold-start run failed (exit $status)"
fi
