#!/usr/bin/env bash
# Prints a PostgreSQL URL the tests can create databases through.
# Uses CONVRAG_TEST_DATABASE_URL when set, else the machine's server on 127.0.0.1:5432 (user
# postgres, trust auth) when it answers, else starts a private throw-away cluster on 127.0.0.1:55432.
set -euo pipefail

if [ -n "${CONVRAG_TEST_DATABASE_URL:-}" ]; then
  echo "$CONVRAG_TEST_DATABASE_URL"; exit 0
fi
if psql "postgres://postgres@127.0.0.1:5432/postgres" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  echo "postgres://postgres@127.0.0.1:5432/postgres"; exit 0
fi

# Start a local PostgreSQL service if one is installed but stopped.
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for v in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 || true
  done
  if psql "postgres://postgres@127.0.0.1:5432/postgres" -qAtc 'SELECT 1' >/dev/null 2>&1; then
    echo "postgres://postgres@127.0.0.1:5432/postgres"; exit 0
  fi
fi

# Otherwise a private cluster with trust auth, owned by an unprivileged user when we are root.
bindir=""
for d in "$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || echo /nonexistent)")")" \
         "$(pg_config --bindir 2>/dev/null || true)" /usr/lib/postgresql/*/bin; do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then bindir="$d"; break; fi
done
[ -n "$bindir" ] || { echo "test-database: no PostgreSQL server binaries (run scripts/setup.sh)" >&2; exit 1; }
dir=/tmp/convrag-test-pg
run=()
if [ "$(id -u)" -eq 0 ]; then run=(runuser -u postgres --); fi
if [ ! -f "$dir/PG_VERSION" ]; then
  mkdir -p "$dir"; chmod 700 "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  "${run[@]}" "$bindir/initdb" -D "$dir" -U postgres -A trust -E UTF8 --no-locale >/dev/null
fi
if ! "${run[@]}" "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
  "${run[@]}" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p 55432 -c unix_socket_directories=$dir -c max_connections=300" start >/dev/null
fi
echo "postgres://postgres@127.0.0.1:55432/postgres"
