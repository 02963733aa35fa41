#!/usr/bin/env bash
# Browser test of a new user's first run (tests/ui/first-run.test.mjs): the set-up steps of
# ./scripts/run.sh into an EMPTY data directory (fetch-models.sh, fetch-manual.sh), then
# `convrag serve --default-collection DIR` as run.sh starts it, with no user and no token given:
# the page signs in through the link the server prints, waits for the default collection, and
# asks its first question.
#
#   scripts/first-run-test.sh                       # the whole PostgreSQL manual, as run.sh serves it
#   scripts/first-run-test.sh --fixture-pages       # only the 3 manual pages in tests/fixtures/html
#   scripts/first-run-test.sh --update-screenshot   # also copy the answer's screenshot to docs/first-answer.png
#
# The whole manual (1,169 pages, 18,225 passages) is indexed in about 25 s here (debug build, one
# indexing thread, a loaded 2-core machine; BENCHMARKS.md), so the test uses the real thing.
#
# Needs what scripts/ui-test.sh needs (chromium, node, a PostgreSQL server) and the network
# access of run.sh's set-up (PyPI and Debian's archive, both cached after the first run). The
# database is a fresh one on the test server (run.sh's embedded cluster is tested elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

update_screenshot=0
full_manual=1
for arg in "$@"; do
  case "$arg" in
    --update-screenshot) update_screenshot=1 ;;
    --fixture-pages) full_manual=0 ;;
    *) echo "first-run-test: unknown argument $arg" >&2; exit 2 ;;
  esac
done

die() { echo "first-run-test: error: $*" >&2; exit 1; }
. scripts/server-line.sh

chromium_bin="${CHROMIUM:-$(command -v chromium || true)}"
[ -n "$chromium_bin" ] && [ -x "$chromium_bin" ] ||
  die "chromium is not installed (scripts/setup.sh installs Debian's chromium package)"
command -v node >/dev/null && command -v npm >/dev/null ||
  die "node and npm are not installed (scripts/setup.sh installs them)"
(cd tests/ui && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
  die "npm ci in tests/ui failed"

cargo build --locked --quiet --bin convrag
convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-first-run.XXXXXX")"
server_pid=""
test_database=""
test_db_admin_url=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$test_database" ]; then
    psql "$test_db_admin_url" -qc "DROP DATABASE IF EXISTS $test_database WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# run.sh's set-up steps, into an empty data directory.
home="$work/home"
mkdir -p "$home"
started=$(date +%s)
CONVRAG_HOME="$home" ./scripts/fetch-models.sh || die "scripts/fetch-models.sh failed"
manual="$(./scripts/fetch-manual.sh)" || die "scripts/fetch-manual.sh failed"
if [ "$full_manual" -eq 1 ]; then
  source_dir="$manual"
else
  source_dir="$root/tests/fixtures/html"
fi
echo "first-run-test: set-up took $(( $(date +%s) - started )) s; default collection from $source_dir"

test_db_admin_url="$(./scripts/test-database.sh)"
test_database="convrag_first_run_$(date +%s)_$$"
psql "$test_db_admin_url" -qc "CREATE DATABASE $test_database" >/dev/null
env DATABASE_URL="${test_db_admin_url%/*}/$test_database" CONVRAG_HOME="$home" RUST_LOG="${RUST_LOG:-info}" \
  "$convrag" serve --bind 127.0.0.1:0 --default-collection "$source_dir" >"$work/server.log" 2>&1 &
server_pid=$!

url="$(server_line "$work/server.log" "$work/server.log" "$server_pid" 60 "$LISTENING_SED" address)" || exit 1
link="$(server_line "$work/server.log" "$work/server.log" "$server_pid" 60 's/^  \(http:.*#sign-in=.*\)$/\1/p' "sign-in link")" || exit 1

artifacts="${CONVRAG_UI_ARTIFACTS:-$root/target/ui-artifacts}"
mkdir -p "$artifacts"
echo "first-run-test: server $url, sign-in link printed, screenshots in $artifacts"
status=0
(cd tests/ui && CONVRAG_UI_URL="$url" CONVRAG_UI_SIGN_IN_LINK="$link" \
  CONVRAG_UI_DEFAULT_COLLECTION=postgresql-manual CONVRAG_UI_ARTIFACTS="$artifacts" CHROMIUM="$chromium_bin" \
  node --test --test-concurrency=1 --test-reporter=spec first-run.test.mjs) || status=$?
cp "$work/server.log" "$artifacts/first-run-server.log"
grep -E "default collection|preparing the default collection" "$work/server.log" >&2 || true
if [ "$status" -ne 0 ]; then
  echo "first-run-test: failed; the server log is in $artifacts/first-run-server.log" >&2
  exit "$status"
fi
if [ "$update_screenshot" -eq 1 ]; then
  mkdir -p docs
  cp "$artifacts/first-answer.png" docs/first-answer.png
  echo "first-run-test: docs/first-answer.png updated"
fi
