#!/usr/bin/env bash
# Tests with the real clients people use (tests/clients): the official `openai` Python package
# against /v1/chat/completions and /v1/models, and the official `mcp` Python SDK client against
# `convrag mcp` (stdio) and /mcp (streamable HTTP). The clients are pinned in a venv this script
# creates under ~/.cache/convrag/venv-clients; the server is a real convrag with the diet fixture
# collection, the real model (./.convrag) and, when CONVRAG_TEST_LLM_URL is set (scripts/test.sh
# starts one), the real LLM; without it answers are extractive.
#
#   scripts/client-tests.sh [pytest arguments]
#
# Fails (never skips) when something it needs is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

OPENAI_VERSION=3.54.0
MCP_VERSION=2.3.0
PYTEST_VERSION=9.2.0

die() { echo "client-tests: error: $*" >&2; exit 1; }

for dir in onnxruntime models; do
  [ -d ".convrag/$dir" ] || die ".convrag/$dir is missing: run scripts/fetch-models.sh"
done
command -v python3 >/dev/null || die "python3 is not installed (scripts/setup.sh installs it)"

venv="${CONVRAG_CLIENTS_VENV:-$HOME/.cache/convrag/venv-clients}"
pins="openai==$OPENAI_VERSION mcp==$MCP_VERSION pytest==$PYTEST_VERSION"
if [ ! -f "$venv/.pins" ] || [ "$(cat "$venv/.pins")" != "$pins" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins || die "installing $pins failed"
  echo "$pins" >"$venv/.pins"
fi

cargo build --locked --quiet --bin convrag
convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-clients.XXXXXX")"
server_pid=""
database=""
db_admin_url=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$database" ]; then
    psql "$db_admin_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A data directory of its own: the fixture collection, and the real model (linked, not copied).
home="$work/home"
mkdir -p "$home"
ln -s "$root/.convrag/onnxruntime" "$home/onnxruntime"
ln -s "$root/.convrag/models" "$home/models"
"$convrag" --home "$home" index --collection diet --format jsonl tests/fixtures/ui/diet.jsonl >"$work/index.log" 2>&1 ||
  { cat "$work/index.log" >&2; die "indexing tests/fixtures/ui/diet.jsonl failed"; }

# A fresh database on the test server.
db_admin_url="${CONVRAG_TEST_DATABASE_URL:-$(./scripts/test-database.sh)}"
database="convrag_clients_$(date +%s)_$$"
psql "$db_admin_url" -qc "CREATE DATABASE $database" >/dev/null
database_url="${db_admin_url%/*}/$database"

admin_token="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
llm_env=()
if [ -n "${CONVRAG_TEST_LLM_URL:-}" ]; then
  llm_env=(CONVRAG_LLM_BASE_URL="$CONVRAG_TEST_LLM_URL" CONVRAG_LLM_MODEL=smollm2-135m-instruct CONVRAG_LLM_TIMEOUT_SECS=300)
fi
env DATABASE_URL="$database_url" CONVRAG_HOME="$home" CONVRAG_ADMIN_TOKEN="$admin_token" \
  "${llm_env[@]}" RUST_LOG="${RUST_LOG:-info}" \
  "$convrag" serve --bind 127.0.0.1:0 >"$work/server.log" 2>&1 &
server_pid=$!

# Port 0 picks a free port; the server prints the address it bound.
url=""
for _ in $(seq 1 600); do
  url="$(sed -n 's/^convrag listening on \(http:[^ ]*\)$/\1/p' "$work/server.log" | head -n1)"
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; die "the server exited while starting"; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log" >&2; die "the server did not start within 60 s"; }

echo "client-tests: server $url (LLM: ${CONVRAG_TEST_LLM_URL:-none, extractive answers})"
status=0
CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_BIN="$convrag" \
  CONVRAG_CLIENTS_COLLECTION=diet \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/clients "$@" || status=$?
if [ "$status" -ne 0 ]; then
  mkdir -p "$root/target"
  cp "$work/server.log" "$root/target/client-tests-server.log"
  echo "client-tests: failed; the server log is in target/client-tests-server.log" >&2
fi
exit "$status"
