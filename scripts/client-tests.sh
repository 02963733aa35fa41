#!/usr/bin/env bash
# Tests with the real clients people use (tests/clients), against two real servers.
#
# The first server has the real LLM when CONVRAG_TEST_LLM_URL is set (scripts/test.sh starts
# one): the official `openai` Python package against /v1/chat/completions and /v1/models, and the
# official `mcp` Python SDK client against `convrag mcp` (stdio) and /mcp (streamable HTTP)
# (tests/clients/*.py); then the JavaScript ones (tests/clients/js/*.test.js), the `openai` npm
# package and `@modelcontextprotocol/sdk`. Without the LLM answers are extractive, and the tests
# that need it (test_instructions_and_usage.py replays the turns' LLM calls against it) fail.
#
# The second server has no LLM (extractive answers: a turn takes about a second, where one with
# the LLM takes 30-70 s on this machine) and a turn rate of TURNS_PER_MINUTE per user, so a
# rate-limited request is a few quick turns away and stays refused for many seconds. Against it,
# each client's rate-limit error on a refused stream, context kept across two turns (one
# conversation holds both) and a readable error for a bad token (tests/clients/limited):
# LangChain's ChatOpenAI and OpenAIEmbeddings, litellm, fastmcp against /mcp, the `openai`
# package's Responses API with previous_response_id; LlamaIndex's OpenAILike and
# OpenAILikeEmbedding (test_llamaindex.py, in a venv of its own: it needs openai<3); and
# (tests/clients/js/limited) the Vercel AI SDK's openai(model) (/v1/responses) and
# openai.chat(model), and openai-node in Chromium on another origin (CONVRAG_CORS_ORIGINS).
#
#   scripts/client-tests.sh [--only main|limited] [pytest arguments]
#
# --only runs one server's tests (main: the first's, limited: the second's); pytest arguments go
# to the first server's pytest (with --only limited, to the second's).
#
# The Python clients are pinned by tests/clients/requirements.txt and
# requirements-llamaindex.txt in venvs this script creates under ~/.cache/convrag (rebuilt when
# the file changes), the JavaScript ones by tests/clients/js/package-lock.json (`npm ci`); both
# servers are real convrags with the diet fixture collection and the real model (./.convrag).
#
# Fails (never skips) when something it needs is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# The second server's turns per minute and user: its bucket holds this many, refilled one every
# 60/TURNS_PER_MINUTE s.
TURNS_PER_MINUTE=2

die() { echo "client-tests: error: $*" >&2; exit 1; }

only=""
if [ "${1:-}" = --only ]; then
  case "${2:-}" in
    main | limited) only="$2" ;;
    *) die "--only needs main or limited" ;;
  esac
  shift 2
fi

# Says when each step ended (seconds since the start), so a slow run shows where its time went.
started=$SECONDS
step() { echo "client-tests: $* (at $((SECONDS - started)) s)"; }

for dir in onnxruntime models; do
  [ -d ".convrag/$dir" ] || die ".convrag/$dir is missing: run scripts/fetch-models.sh"
done
command -v python3 >/dev/null || die "python3 is not installed (scripts/setup.sh installs it)"
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"
chromium_bin="${CHROMIUM:-$(command -v chromium || true)}"
[ -n "$chromium_bin" ] && [ -x "$chromium_bin" ] ||
  die "chromium is not installed (scripts/setup.sh installs Debian's chromium package)"

# A venv holding exactly the pins of a requirements file; rebuilt when the file changes.
make_venv() {
  local venv="$1" requirements="$2"
  if ! cmp -s "$requirements" "$venv/.requirements.txt" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; return 1; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" ||
      { echo "installing $requirements into $venv failed" >&2; return 1; }
    cp "$requirements" "$venv/.requirements.txt"
  fi
}
venv="${CONVRAG_CLIENTS_VENV:-$HOME/.cache/convrag/venv-clients}"
llama_venv="${CONVRAG_CLIENTS_LLAMAINDEX_VENV:-$HOME/.cache/convrag/venv-clients-llamaindex}"
js=tests/clients/js
# The installs overlap each other and the servers' start (mostly downloads).
install_log="$(mktemp -d)"
make_venv "$venv" tests/clients/requirements.txt >"$install_log/venv.log" 2>&1 &
venv_job=$!
make_venv "$llama_venv" tests/clients/requirements-llamaindex.txt >"$install_log/llama.log" 2>&1 &
llama_job=$!
(
  if ! cmp -s "$js/package-lock.json" "$js/node_modules/.package-lock.json.installed" 2>/dev/null; then
    cd "$js" && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.package-lock.json.installed
  fi
) >"$install_log/npm.log" 2>&1 &
npm_job=$!

# shellcheck source=scripts/test-server.sh
. scripts/test-server.sh
llm_env=()
if [ -n "${CONVRAG_TEST_LLM_URL:-}" ]; then
  llm_env=(CONVRAG_LLM_BASE_URL="$CONVRAG_TEST_LLM_URL" CONVRAG_LLM_MODEL=smollm2-135m-instruct CONVRAG_LLM_TIMEOUT_SECS=300)
fi
# A web origin allowed to call the API from the browser (the CORS test sends its preflights).
origin=http://127.0.0.1:9
start_test_server clients CONVRAG_CORS_ORIGINS="$origin" "${llm_env[@]}"
main_url="$url" main_admin="$admin_token" main_work="$work"

# The second server's allowed origin: a free loopback port, where browser.test.js serves its page.
page_port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
page_origin="http://127.0.0.1:$page_port"
start_test_server clients_limited CONVRAG_LIMIT_TURNS_PER_MINUTE="$TURNS_PER_MINUTE" CONVRAG_CORS_ORIGINS="$page_origin"
limited_url="$url" limited_admin="$admin_token" limited_work="$work"
step "servers started"

for job in venv:$venv_job llama:$llama_job npm:$npm_job; do
  wait "${job#*:}" || { cat "$install_log/${job%%:*}.log" >&2; die "installing the clients failed (${job%%:*})"; }
done
rm -rf "$install_log"
step "clients installed"

status=0
failed=()
if [ "$only" != limited ]; then
  echo "client-tests: server $main_url (LLM: ${CONVRAG_TEST_LLM_URL:-none, extractive answers})"
  CONVRAG_CLIENTS_URL="$main_url" CONVRAG_CLIENTS_ADMIN="$main_admin" CONVRAG_CLIENTS_BIN="$convrag" \
    CONVRAG_CLIENTS_COLLECTION=diet CONVRAG_CLIENTS_LLM_URL="${CONVRAG_TEST_LLM_URL:-}" \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/clients --ignore=tests/clients/limited "$@" ||
    failed+=(main-python)
  CONVRAG_CLIENTS_URL="$main_url" CONVRAG_CLIENTS_ADMIN="$main_admin" CONVRAG_CLIENTS_COLLECTION=diet \
    CONVRAG_CLIENTS_ORIGIN="$origin" \
    node --test --test-concurrency=1 "$js"/*.test.js || failed+=(main-js)
  step "first server's tests done"
fi

if [ "$only" != main ]; then
  echo "client-tests: server $limited_url (no LLM, $TURNS_PER_MINUTE turns per minute and user)"
  limited_env=(CONVRAG_CLIENTS_URL="$limited_url" CONVRAG_CLIENTS_ADMIN="$limited_admin" CONVRAG_CLIENTS_COLLECTION=diet
    CONVRAG_CLIENTS_TURNS_PER_MINUTE="$TURNS_PER_MINUTE" CONVRAG_CLIENTS_ORIGIN="$page_origin" CHROMIUM="$chromium_bin")
  env "${limited_env[@]}" "$venv/bin/python" -m pytest -p no:cacheprovider -q --confcutdir=tests/clients/limited tests/clients/limited \
    --ignore=tests/clients/limited/test_llamaindex.py ${only:+"$@"} || failed+=(limited-python)
  env "${limited_env[@]}" "$llama_venv/bin/python" -m pytest -p no:cacheprovider -q --confcutdir=tests/clients/limited \
    tests/clients/limited/test_llamaindex.py || failed+=(limited-llamaindex)
  env "${limited_env[@]}" node --test --test-concurrency=1 "$js"/limited/*.test.js || failed+=(limited-js)
  step "second server's tests done"
fi

if [ "${#failed[@]}" -ne 0 ]; then
  mkdir -p "$root/target"
  cp "$main_work/server.log" "$root/target/client-tests-server.log"
  cp "$limited_work/server.log" "$root/target/client-tests-limited-server.log"
  echo "client-tests: failed: ${failed[*]}; the servers' logs are in target/client-tests-server.log and target/client-tests-limited-server.log" >&2
  status=1
fi
exit "$status"
