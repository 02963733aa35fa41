#!/usr/bin/env bash
# Browser tests of the chat page (tests/ui): a real convrag server with a small real collection,
# driven by Playwright (playwright-core from npm) through Debian's chromium, headless; and the
# turn stream's contract, read through the page's own stream module in node (stream.test.mjs).
#
#   scripts/ui-test.sh                       # run them; screenshots in target/ui-artifacts/
#   scripts/ui-test.sh --update-screenshot   # also copy the desktop screenshot to docs/chat.png
#
# Needs: chromium and node/npm (scripts/setup.sh installs them), the ONNX Runtime and model in
# ./.convrag (scripts/fetch-models.sh), a PostgreSQL server (scripts/test-database.sh finds or
# starts one). With CONVRAG_TEST_LLM_URL (scripts/llm-server.sh, started by scripts/test.sh) the
# server answers with that real LLM; without it, the server is given an LLM endpoint on a closed
# loopback port, so the page's handling of a real "LLM unreachable" fallback is what is tested.
# Fails (never skips) when any of it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

update_screenshot=0
for arg in "$@"; do
  case "$arg" in
    --update-screenshot) update_screenshot=1 ;;
    *) echo "ui-test: unknown argument $arg" >&2; exit 2 ;;
  esac
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

# Node dependencies, exactly as locked (npm keeps its download cache in ~/.npm).
(cd tests/ui && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
  die "npm ci in tests/ui failed"

cargo build --locked --quiet --bin convrag
convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-ui.XXXXXX")"
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
db_admin_url="$(./scripts/test-database.sh)"
database="convrag_ui_$(date +%s)_$$"
psql "$db_admin_url" -qc "CREATE DATABASE $database" >/dev/null
database_url="${db_admin_url%/*}/$database"

admin_token="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
if [ -n "${CONVRAG_TEST_LLM_URL:-}" ]; then
  llm_mode=real
  llm_url="$CONVRAG_TEST_LLM_URL"
else
  llm_mode=down
  # A port that was free a moment ago: nothing answers there.
  closed_port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
  llm_url="http://127.0.0.1:$closed_port/v1"
fi
env DATABASE_URL="$database_url" CONVRAG_HOME="$home" CONVRAG_ADMIN_TOKEN="$admin_token" \
  CONVRAG_LLM_BASE_URL="$llm_url" CONVRAG_LLM_MODEL=smollm2-135m-instruct \
  RUST_LOG="${RUST_LOG:-info}" \
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

# A user, created with the administrator token like an operator would.
token="$(URL="$url" ADMIN="$admin_token" node --input-type=module -e '
  const r = await fetch(process.env.URL + "/v1/users", {
    method: "POST",
    headers: { Authorization: "Bearer " + process.env.ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify({ name: "ui-tester" }),
  });
  const body = await r.json();
  if (r.status !== 201) { console.error(JSON.stringify(body)); process.exit(1); }
  console.log(body.token);
')" || die "creating the test user failed"

artifacts="${CONVRAG_UI_ARTIFACTS:-$root/target/ui-artifacts}"
rm -rf "$artifacts"
mkdir -p "$artifacts"
echo "ui-test: server $url (LLM: $llm_mode, $llm_url), screenshots in $artifacts"
status=0
(cd tests/ui && CONVRAG_UI_URL="$url" CONVRAG_UI_TOKEN="$token" CONVRAG_UI_COLLECTION=diet \
  CONVRAG_UI_LLM="$llm_mode" \
  CONVRAG_UI_ARTIFACTS="$artifacts" CHROMIUM="$chromium_bin" \
  node --test --test-concurrency=1 --test-reporter=spec stream.test.mjs chat.test.mjs) || status=$?
cp "$work/server.log" "$artifacts/server.log"
if [ "$status" -ne 0 ]; then
  echo "ui-test: the browser tests failed; the server log is in $artifacts/server.log" >&2
  exit "$status"
fi
if [ "$update_screenshot" -eq 1 ]; then
  mkdir -p docs
  cp "$artifacts/chat-desktop.png" docs/chat.png
  echo "ui-test: docs/chat.png updated"
fi
