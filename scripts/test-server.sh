# Sourced by the scripts that test against a running server (ui-test.sh, client-tests.sh): one way
# to start a real convrag on a free loopback port with the diet fixture collection, the real model
# (./.convrag, linked) and a fresh database on the test server; stopped and dropped on exit.
#
#   start_test_server NAME [VAR=VALUE ...]   # extra environment for `convrag serve`
#
# Sets: convrag (the binary), work (a scratch directory), url, admin_token, server_pid, and
# server_home and server_database_url (for `convrag` commands against the same server's data).
# The caller defines die() and runs from the repository root ($root). It may be called again
# (another NAME) for a second server: the variables then describe the newest one (copy what the
# caller needs of the earlier one first), and every server started is stopped on exit.

. scripts/server-line.sh

start_test_server() {
  local name="$1"
  shift
  cargo build --locked --quiet --bin convrag
  convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
  [ -x "$convrag" ] || die "no convrag binary at $convrag"

  work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-$name.XXXXXX")"
  test_server_works+=("$work")
  server_pid=""
  trap stop_test_server EXIT

  # A data directory of its own: the fixture collection, and the real model (linked, not copied).
  server_home="$work/home"
  local home="$server_home"
  mkdir -p "$home"
  ln -s "$root/.convrag/onnxruntime" "$home/onnxruntime"
  ln -s "$root/.convrag/models" "$home/models"
  "$convrag" --home "$home" index --collection diet --format jsonl tests/fixtures/jsonl/diet.jsonl >"$work/index.log" 2>&1 ||
    { cat "$work/index.log" >&2; die "indexing tests/fixtures/jsonl/diet.jsonl failed"; }

  # A fresh database on the test server.
  test_db_admin_url="$(./scripts/test-database.sh)"
  local test_database
  test_database="convrag_${name}_$(date +%s)_$$"
  psql "$test_db_admin_url" -qc "CREATE DATABASE $test_database" >/dev/null
  test_server_databases+=("$test_database")
  server_database_url="${test_db_admin_url%/*}/$test_database"
  local database_url="$server_database_url"

  admin_token="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
  env DATABASE_URL="$database_url" CONVRAG_HOME="$home" CONVRAG_ADMIN_TOKEN="$admin_token" \
    RUST_LOG="${RUST_LOG:-info}" "$@" \
    "$convrag" serve --bind 127.0.0.1:0 >"$work/server.log" 2>&1 &
  server_pid=$!
  test_server_pids+=("$server_pid")

  # Port 0 picks a free port; the server prints the address it bound.
  url="$(server_line "$work/server.log" "$work/server.log" "$server_pid" 60 "$LISTENING_SED" address)" || exit 1
}

# Every server started, its database and scratch directory (stop_test_server ends them all).
test_server_pids=()
test_server_databases=()
test_server_works=()
test_db_admin_url=""

stop_test_server() {
  local pid database dir
  for pid in "${test_server_pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  for database in "${test_server_databases[@]}"; do
    psql "$test_db_admin_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  done
  for dir in "${test_server_works[@]}"; do
    rm -rf "$dir"
  done
}
