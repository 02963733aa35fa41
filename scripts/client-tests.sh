#!/usr/bin/env bash
# Tests with the real clients people use (tests/clients): the official `openai` Python package
# against /v1/chat/completions, /v1/responses and /v1/models, LangChain's ChatOpenAI
# (`langchain-openai`), LiteLLM and LlamaIndex's OpenAILike against /v1/chat/completions, the official `mcp` Python SDK
# client against `convrag mcp` (stdio) and /mcp (streamable HTTP) and FastMCP's Client against
# /mcp; then the JavaScript ones (tests/clients/js), the `openai` npm package, the Vercel AI SDK
# (`ai` with `@ai-sdk/openai`: the Responses API and chat completions) and
# `@modelcontextprotocol/sdk`, run by `node --test` against the same server. Each client is
# checked for a streamed 429 raising its own rate-limit error, context kept across two turns and a
# readable error for a bad token. The Python clients are pinned in a venv this script creates under
# ~/.cache/convrag/venv-clients (LlamaIndex, which needs openai<3, in venv-clients-llamaindex
# beside it, for test_llamaindex_client.py alone), the JavaScript ones by tests/clients/js/package-lock.json
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
LANGCHAIN_OPENAI_VERSION=1.7.4
LITELLM_VERSION=1.110.2
FASTMCP_VERSION=4.2.3
LLAMA_INDEX_CORE_VERSION=0.14.25
LLAMA_INDEX_OPENAI_LIKE_VERSION=0.8.1

die() { echo "client-tests: error: $*" >&2; exit 1; }

for dir in onnxruntime models; do
  [ -d ".convrag/$dir" ] || die ".convrag/$dir is missing: run scripts/fetch-models.sh"
done
command -v python3 >/dev/null || die "python3 is not installed (scripts/setup.sh installs it)"
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"

# A venv holding exactly `pins` (made anew when they change).
pinned_venv() {
  local venv="$1" pins="$2"
  if [ ! -f "$venv/.pins" ] || [ "$(cat "$venv/.pins")" != "$pins" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins || die "installing $pins failed"
    echo "$pins" >"$venv/.pins"
  fi
}
venv="${CONVRAG_CLIENTS_VENV:-$HOME/.cache/convrag/venv-clients}"
pins="openai==$OPENAI_VERSION mcp==$MCP_VERSION pytest==$PYTEST_VERSION"
pins+=" langchain-openai==$LANGCHAIN_OPENAI_VERSION litellm==$LITELLM_VERSION fastmcp==$FASTMCP_VERSION"
pinned_venv "$venv" "$pins"
llamaindex_venv="$venv-llamaindex"
pinned_venv "$llamaindex_venv" "llama-index-core==$LLAMA_INDEX_CORE_VERSION \
llama-index-llms-openai-like==$LLAMA_INDEX_OPENAI_LIKE_VERSION pytest==$PYTEST_VERSION"

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
python_status=0
CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_BIN="$convrag" \
  CONVRAG_CLIENTS_COLLECTION=diet CONVRAG_CLIENTS_LLM_URL="${CONVRAG_TEST_LLM_URL:-}" \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/clients \
  --ignore=tests/clients/test_llamaindex_client.py "$@" || python_status=$?
# LlamaIndex in its own venv, given the same pytest arguments but for test paths: it runs unless
# they name test paths none of which holds its file. When pytest arguments select tests of only
# one of the two runs, the other's "none collected" (exit 5) is no failure; both is.
llamaindex_file="$root/tests/clients/test_llamaindex_client.py"
llamaindex_args=()
named_paths=0
llamaindex_named=0
llamaindex_held=0
for arg in "$@"; do
  path="${arg%%::*}"
  if [[ "$arg" != -* ]] && [ -e "$path" ]; then
    named_paths=1
    path="$(realpath "$path")"
    if [ "$path" = "$llamaindex_file" ]; then
      llamaindex_named=1
      llamaindex_args+=("$arg")
    elif [[ "$llamaindex_file" == "$path"/* ]]; then
      llamaindex_held=1
    fi
  else
    llamaindex_args+=("$arg")
  fi
done
if { [ "$named_paths" -eq 0 ] || [ "$llamaindex_held" -eq 1 ]; } && [ "$llamaindex_named" -eq 0 ]; then
  llamaindex_args+=("$llamaindex_file")
fi
llamaindex_status=5
if [ "$named_paths" -eq 0 ] || [ "$llamaindex_named" -eq 1 ] || [ "$llamaindex_held" -eq 1 ]; then
  llamaindex_status=0
  CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_BIN="$convrag" \
    CONVRAG_CLIENTS_COLLECTION=diet CONVRAG_CLIENTS_LLM_URL="${CONVRAG_TEST_LLM_URL:-}" \
    "$llamaindex_venv/bin/python" -m pytest -p no:cacheprovider -q "${llamaindex_args[@]}" || llamaindex_status=$?
fi
for run_status in "$python_status" "$llamaindex_status"; do
  if [ "$run_status" -ne 0 ] && ! { [ "$#" -gt 0 ] && [ "$run_status" -eq 5 ]; }; then
    status=$run_status
  fi
done
if [ "$python_status" -eq 5 ] && [ "$llamaindex_status" -eq 5 ]; then
  status=5
fi
CONVRAG_CLIENTS_URL="$url" CONVRAG_CLIENTS_ADMIN="$admin_token" CONVRAG_CLIENTS_COLLECTION=diet \
  CONVRAG_CLIENTS_ORIGIN="$origin" \
  node --test --test-concurrency=1 "$js"/*.test.js || status=$?
if [ "$status" -ne 0 ]; then
  mkdir -p "$root/target"
  cp "$work/server.log" "$root/target/client-tests-server.log"
  echo "client-tests: failed; the server log is in target/client-tests-server.log" >&2
fi
exit "$status"
