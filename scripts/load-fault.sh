#!/usr/bin/env bash
# Loopback load-and-fault run: a private PostgreSQL cluster (initdb in a scratch directory, its own
# port; the machine's server is never touched), a fixed-answer LLM peer, `convrag serve` over the
# diet fixture collection, N concurrent turns with PostgreSQL stopped, the LLM killed and the server
# SIGKILLed mid-run; clients retry with the same Idempotency-Key. Checks that every acknowledged
# turn is stored complete and nothing else is (scripts/load_fault.py), prints throughput and
# latency percentiles as JSON.
#
#   scripts/load-fault.sh                 # short mode (scripts/test.sh): 60 turns, each fault once
#   scripts/load-fault.sh --turns 300     # any option of `scripts/load_fault.py run`
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
die() { echo "load-fault: error: $*" >&2; exit 1; }

pg_bindir="${CONVRAG_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}"
[ -x "$pg_bindir/initdb" ] || die "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql/*/bin; apt-get install postgresql"
id postgres >/dev/null 2>&1 || [ "$(id -u)" != 0 ] || die "running as root needs the unprivileged 'postgres' user to own the cluster"

cargo build --locked --quiet --bin convrag
convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-load-fault.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
home="$work/home"
mkdir -p "$home"
"$convrag" --home "$home" index --collection diet --format jsonl tests/fixtures/jsonl/diet.jsonl >"$work/index.log" 2>&1 ||
  { cat "$work/index.log" >&2; die "indexing tests/fixtures/jsonl/diet.jsonl failed"; }

status=0
timeout 900 python3 scripts/load_fault.py run --binary "$convrag" --home "$home" --work "$work/pg" \
  --pg-bindir "$pg_bindir" "$@" || status=$?
if [ "$status" != 0 ]; then
  tail -n 40 "$work/server.log" >&2 2>/dev/null || true
  die "load-and-fault run failed (exit $status)"
fi
