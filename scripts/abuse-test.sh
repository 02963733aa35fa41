#!/usr/bin/env bash
# Nothing a caller sends grows a real `convrag serve` without bound (issue 53), replayed against a
# real process on loopback (a fresh database on the test server, no collection but the private one
# the upload case makes) by scripts/abuse_test.py (Python 3 standard library):
#   1. 8 parallel PUTs of maximum-size qrels, twice: resident memory grows < 300 MB during and
#      after them, and another user's GET /v1/conversations answers within 1 s meanwhile;
#   2. 3,000 requests with made-up HTTP methods leave the /metrics series count unchanged;
#   3. slow JSON bodies and a slow upload are cut at their deadlines (short ones set below);
#   4. a token minted with a revoked token is refused.
# It prints its figures and ends with `N passed, 0 failed` (exit status 1 on any failure).
#
#   scripts/abuse-test.sh        (builds the debug binary if missing)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "abuse-test: error: $*" >&2; exit 1; }
. scripts/server-line.sh

bin="${CONVRAG_BIN:-${CARGO_TARGET_DIR:-target}/debug/convrag}"
[ -x "$bin" ] || cargo build --locked --quiet --bin convrag

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-abuse.XXXXXX")"
server_pid="" database="" admin_url=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  [ -z "$database" ] || psql "$admin_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

admin_url="$(./scripts/test-database.sh)"
database="convrag_abuse_$(date +%s)_$$"
psql "$admin_url" -qc "CREATE DATABASE $database" >/dev/null
metrics_port="$(free_port)"
mkdir -p "$work/home"
# Short deadlines so the slow senders are cut within seconds; the qrels limits are the defaults
# (8 MiB a text), which the probe sends at their maximum.
env -u CONVRAG_LLM_BASE_URL DATABASE_URL="${admin_url%/*}/$database" CONVRAG_HOME="$work/home" \
  CONVRAG_ADMIN_TOKEN=abuse-test-admin RUST_LOG=warn \
  CONVRAG_LIMIT_BODY_READ_SECS=3 CONVRAG_UPLOAD_DEADLINE_SECS=4 CONVRAG_UPLOAD_BODY_IDLE_SECS=3 \
  "$bin" serve --bind 127.0.0.1:0 --metrics-bind "127.0.0.1:$metrics_port" \
  >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
url="$(server_line "$work/server.out" "$work/server.err" "$server_pid" 30 "$LISTENING_SED" address)" || exit 1

status=0
python3 scripts/abuse_test.py --url "$url" --metrics "http://127.0.0.1:$metrics_port/metrics" \
  --pid "$server_pid" --admin-token abuse-test-admin \
  --body-read-secs 3 --upload-deadline-secs 4 || status=$?
if [ "$status" -ne 0 ]; then
  echo "abuse-test: server stderr (last 20 lines):" >&2
  tail -n 20 "$work/server.err" >&2 || true
fi
exit "$status"
