#!/usr/bin/env bash
# Tests with the real clients people use (tests/clients): the official `openai` Python package
# against /v1/chat/completions and /v1/models, and the official `mcp` Python SDK client against
# `convrag mcp` (stdio) and /mcp (streamable HTTP); then the JavaScript ones (tests/clients/js),
# the `openai` npm package and `@modelcontextprotocol/sdk`, run by `node --test` against the same
# server. The Python clients are pinned in a venv this script creates under
# ~/.cache/convrag/venv-clients, the JavaScript ones by tests/clients/js/package-lock.json
# (`npm ci`); the server is a real convrag with the diet fixture
# collection, the real model (./.convrag) and, when CONVRAG_TEST_LLM_URL is set (scripts/test.sh
# starts one), the real LLM; without it answers are extractive, and the tests that need the LLM
# (test_instructions_and_usage.py replays the turns' LLM calls against it) fail.
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
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"

venv="${CONVRAG_CLIENTS_VENV:-$HOME/.cache/convrag/venv-clients}"
pins="openai==$OPENAI_VERSION mcp==$MCP_VERSION pytest==$PYTEST_VERSION"
if [ ! -f "$venv/.pins" ] || [ "$(cat "$venv/.pins")" != "$pins" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $pins || die "installing $pins failed"
  echo "$pins" >"$venv/.pins"
fi

js=tests/clients/js
if ! cmp -s "$js/package-lock.json" "$js/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in $js failed"
  cp "$js/package-lock.json" "$js/node_modules/.package-lock.json.installed"
fi

# shellcheck source=scripts/test-server.sh
. scripts/test-server.sh
llm_env=()
if [ -n "${CONVRAG_TEST_LLM_URL:-}" ]; then
  llm_env=(CONVRAG_LLM_BASE_URL="$CONVRAG_TEST_LLM_URL" CONVRAG_LLM_MODEL=smollm2-135m-instruct CONVRAG_LLM_TIMEOUT_SECS=300)
fi
# A web origin allowed to call the API from the browser (the CORS test sends its preflights).
origin=http://127.0.0.1:9
start_test_server clients CONVRAG_CORS_ORIGINS="$origin" "${llm_env[@]}"

echo "client-tests: server $url (LLM: ${CONVRAG_TEST_LLM_URL:-none, extractive answers})"
status=0
CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_BIN="$convrag" \
  CONVRAG_CLIENTS_COLLECTION=diet CONVRAG_CLIENTS_LLM_URL="${CONVRAG_TEST_LLM_URL:-}" \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/clients "$@" || status=$?
CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_COLLECTION=diet \
  CONVRAG_CLIENTS_ORIGIN="$origin" \
  node --test --test-concurrency=1 "$js"/*.test.js || status=$?
if [ "$status" -ne 0 ]; then
  mkdir -p "$root/target"
  cp "$work/server.log" "$root/target/client-tests-server.log"
  echo "client-tests: failed; the server log is in target/client-tests-server.log" >&2
fi
exit "$status"
