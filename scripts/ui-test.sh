#!/usr/bin/env bash
# Browser tests of the chat page (tests/ui): a real convrag server with a small real collection
# (and two batch runs of a third user for the Runs view, runs.test.mjs; a fourth user's upload
# for the Markdown rendering of answers, markdown.test.mjs; a fifth user's turns with each first
# stage, retrieval.test.mjs, over the collection's passage vectors computed when it is indexed;
# a sixth user's one-statement PTKB used only where it belongs, personalization.test.mjs; a
# seventh user's search query with its words marked by origin, search-query.test.mjs),
# driven by Playwright (playwright-core from npm) through Debian's chromium, headless; the
# turn stream's contract, read through the page's own stream module in node (stream.test.mjs);
# and CORS: a page on another loopback port calling the API and /mcp from chromium, allowed for
# the origin the server is configured with and blocked for another (cors.test.mjs).
#
#   scripts/ui-test.sh                       # both LLM modes, one server each (below)
#   scripts/ui-test.sh --llm real            # only with the real LLM
#   scripts/ui-test.sh --llm down            # only with the LLM endpoint down
#   scripts/ui-test.sh --update-screenshot   # also copy the desktop screenshot to docs/chat.png
#                                            # (from the real run; from the down run with --llm down)
#   scripts/ui-test.sh --llm down --only search-query.test.mjs   # one test file of tests/ui
#
# The two modes, each asserting its one outcome (CONVRAG_UI_LLM in chat.test.mjs):
#   real  the server answers with the real LLM at CONVRAG_TEST_LLM_URL (scripts/llm-server.sh,
#         started by scripts/test.sh); its answer is used and cites.
#   down  the server is given an LLM endpoint on a closed loopback port, so the page's handling of
#         a real "LLM unreachable" fallback is what is tested.
# Screenshots and the server log of each mode go to target/ui-artifacts/llm-real/ and llm-down/.
#
# Needs: chromium and node/npm (scripts/setup.sh installs them), the ONNX Runtime and model in
# ./.convrag (scripts/fetch-models.sh), a PostgreSQL server (scripts/test-database.sh finds or
# starts one), and for the real mode CONVRAG_TEST_LLM_URL. Fails (never skips) when any of it is
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

update_screenshot=0
llm_modes="real down"
only=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --update-screenshot) update_screenshot=1 ;;
    --only)
      [ "$#" -ge 2 ] && [ -f "tests/ui/$2" ] || { echo "ui-test: --only needs a test file of tests/ui" >&2; exit 2; }
      only="$2"
      shift
      ;;
    --llm)
      [ "$#" -ge 2 ] || { echo "ui-test: --llm needs real or down" >&2; exit 2; }
      case "$2" in
        real | down) llm_modes="$2" ;;
        *) echo "ui-test: --llm must be real or down, not $2" >&2; exit 2 ;;
      esac
      shift
      ;;
    *) echo "ui-test: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "ui-test: error: $*" >&2; exit 1; }

chromium_bin="${CHROMIUM:-$(command -v chromium || true)}"
[ -n "$chromium_bin" ] && [ -x "$chromium_bin" ] ||
  die "chromium is not installed (scripts/setup.sh installs Debian's chromium package)"
command -v node >/dev/null && command -v npm >/dev/null ||
  die "node and npm are not installed (scripts/setup.sh installs them)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
  die "node $(node --version) is too old: playwright-core needs node 20 or later"
for dir in onnxruntime models; do
  [ -d ".convrag/$dir" ] || die ".convrag/$dir is missing: run scripts/fetch-models.sh"
done

artifacts_root="${CONVRAG_UI_ARTIFACTS:-$root/target/ui-artifacts}"

# Both modes: this script once per mode, each with a server of its own; both run even when the
# first fails, and the result fails when either does.
if [ "$llm_modes" = "real down" ]; then
  [ -n "${CONVRAG_TEST_LLM_URL:-}" ] ||
    die "CONVRAG_TEST_LLM_URL is not set: start the test LLM (scripts/llm-server.sh start) or choose --llm down"
  rm -rf "$artifacts_root"
  failed=()
  for mode in real down; do
    CONVRAG_UI_ARTIFACTS="$artifacts_root" "$root/scripts/ui-test.sh" --llm "$mode" ${only:+--only "$only"} || failed+=("$mode")
  done
  [ "${#failed[@]}" -eq 0 ] || die "the browser tests failed with the LLM ${failed[*]}"
  if [ "$update_screenshot" -eq 1 ]; then
    mkdir -p docs
    cp "$artifacts_root/llm-real/chat-desktop.png" docs/chat.png
    echo "ui-test: docs/chat.png updated (from the real LLM run)"
  fi
  exit 0
fi
llm_mode="$llm_modes"

[ "$llm_mode" = down ] || [ -n "${CONVRAG_TEST_LLM_URL:-}" ] ||
  die "--llm real needs CONVRAG_TEST_LLM_URL (scripts/llm-server.sh start prints it)"

# Node dependencies, exactly as locked (npm keeps its download cache in ~/.npm).
(cd tests/ui && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
  die "npm ci in tests/ui failed"

# A loopback port that was free a moment ago.
free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
closed_port="$(free_port)"
case "$llm_mode" in
  real) llm_url="$CONVRAG_TEST_LLM_URL" ;;
  # Nothing answers there.
  down) llm_url="http://127.0.0.1:$closed_port/v1" ;;
esac
# Two more for the pages of cors.test.mjs: the first one's origin is allowed.
cors_allowed_port="$(free_port)"
while [ "$cors_allowed_port" = "$closed_port" ]; do cors_allowed_port="$(free_port)"; done
cors_blocked_port="$(free_port)"
while [ "$cors_blocked_port" = "$closed_port" ] || [ "$cors_blocked_port" = "$cors_allowed_port" ]; do
  cors_blocked_port="$(free_port)"
done
# shellcheck source=scripts/test-server.sh
. scripts/test-server.sh
start_test_server "ui_$llm_mode" CONVRAG_LLM_BASE_URL="$llm_url" CONVRAG_LLM_MODEL=smollm2-135m-instruct \
  CONVRAG_CORS_ORIGINS="http://127.0.0.1:$cors_allowed_port"

# Two users, created with the administrator token like an operator would (the second one must
# not see the first one's private collection).
new_user() {
  URL="$url" ADMIN="$admin_token" NAME="$1" node --input-type=module -e '
    const r = await fetch(process.env.URL + "/v1/users", {
      method: "POST",
      headers: { Authorization: "Bearer " + process.env.ADMIN, "Content-Type": "application/json" },
      body: JSON.stringify({ name: process.env.NAME }),
    });
    const body = await r.json();
    if (r.status !== 201) { console.error(JSON.stringify(body)); process.exit(1); }
    console.log(body.token);
  '
}
token="$(new_user ui-tester)" || die "creating the test user failed"
other_token="$(new_user ui-other)" || die "creating the second test user failed"
runs_token="$(new_user ui-runs)" || die "creating the user of the batch runs failed"
# The CORS, Markdown and first-stage tests' conversations stay out of the chat test's list.
cors_token="$(new_user ui-cors)" || die "creating the user of the CORS test failed"
md_token="$(new_user ui-markdown)" || die "creating the user of the Markdown test failed"
retrieval_token="$(new_user ui-retrieval)" || die "creating the user of the first-stage test failed"
personal_token="$(new_user ui-personal)" || die "creating the user of the personalization test failed"
origins_token="$(new_user ui-origins)" || die "creating the user of the search query test failed"

# Two stored batch runs of a third user for the Runs view (runs.test.mjs; their conversations
# would fill the chat test's list): automatic and manual rewrites of the same topics over the
# diet collection, BM25 order.
for run_type in automatic manual; do
  env DATABASE_URL="$server_database_url" CONVRAG_HOME="$server_home" RUST_LOG=warn \
    "$convrag" run ikat --topics tests/fixtures/ikat/topics_ui_runs.json --collection diet \
    --run-type "$run_type" --stages ptkb,rewrite,retrieve --depth 20 --passages 10 \
    --run-name "diet-$run_type" --user ui-runs --output "$work/diet-$run_type.json" --quiet \
    >"$work/run-$run_type.log" 2>&1 ||
    { cat "$work/run-$run_type.log" >&2; die "the $run_type batch run for the Runs view failed"; }
done

files=(stream.test.mjs chat.test.mjs markdown.test.mjs retrieval.test.mjs personalization.test.mjs search-query.test.mjs runs.test.mjs cors.test.mjs)
[ -z "$only" ] || files=("$only")
artifacts="$artifacts_root/llm-$llm_mode"
rm -rf "$artifacts"
mkdir -p "$artifacts"
echo "ui-test: server $url (LLM: $llm_mode, $llm_url), screenshots in $artifacts"
status=0
(cd tests/ui && CONVRAG_UI_URL="$url" CONVRAG_UI_TOKEN="$token" CONVRAG_UI_OTHER_TOKEN="$other_token" \
  CONVRAG_UI_RUNS_TOKEN="$runs_token" CONVRAG_UI_CORS_TOKEN="$cors_token" CONVRAG_UI_MD_TOKEN="$md_token" \
  CONVRAG_UI_RETRIEVAL_TOKEN="$retrieval_token" CONVRAG_UI_PERSONAL_TOKEN="$personal_token" \
  CONVRAG_UI_ORIGINS_TOKEN="$origins_token" \
  CONVRAG_UI_CORS_ALLOWED_PORT="$cors_allowed_port" CONVRAG_UI_CORS_BLOCKED_PORT="$cors_blocked_port" \
  CONVRAG_UI_COLLECTION=diet CONVRAG_UI_QRELS="$root/tests/fixtures/ikat/qrels_ui_runs.txt" \
  CONVRAG_UI_LLM="$llm_mode" \
  CONVRAG_UI_ARTIFACTS="$artifacts" CHROMIUM="$chromium_bin" \
  node --test --test-concurrency=1 --test-reporter=spec "${files[@]}") || status=$?
cp "$work/server.log" "$artifacts/server.log"
if [ "$status" -ne 0 ]; then
  echo "ui-test: the browser tests failed with the LLM $llm_mode; the server log is in $artifacts/server.log" >&2
  exit "$status"
fi
if [ "$update_screenshot" -eq 1 ]; then
  mkdir -p docs
  cp "$artifacts/chat-desktop.png" docs/chat.png
  echo "ui-test: docs/chat.png updated (from the $llm_mode LLM run)"
fi
