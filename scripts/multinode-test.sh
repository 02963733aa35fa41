#!/usr/bin/env bash
# Many convrag servers on one PostgreSQL, on loopback: PgBouncer (transaction pooling) + HAProxy
# (health checks on /readyz) + 3 `convrag serve` on ports of their own, against a database of its
# own. Measures turns/s through 1 server and through 3; SIGKILLs one server in the middle of the
# load and restarts it (no acknowledged turn may be lost; the load goes on through the other two);
# then a batch run with 2 workers, one SIGKILLed midway and finished by the other, whose file must
# be byte-identical to a one-process run. Bounded (about 3 minutes), cleans up after itself.
#
#   scripts/multinode-test.sh            # needs the test database server (scripts/test-database.sh)
#   scripts/multinode-test.sh --install  # only installs pgbouncer and haproxy (apt)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

die() { echo "multinode-test: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_peers() {
  if [ ! -x /usr/sbin/pgbouncer ] || [ ! -x /usr/sbin/haproxy ]; then
    as_root apt-get update -qq
    # Packaged services must not start on the machine's ports: these are run privately below.
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends pgbouncer haproxy >/dev/null
    for s in pgbouncer haproxy; do
      as_root sh -c "systemctl disable --now $s >/dev/null 2>&1 || service $s stop >/dev/null 2>&1 || true"
    done
  fi
}
install_peers
[ "${1:-}" = "--install" ] && exit 0

LOAD_SECONDS="${LOAD_SECONDS:-12}"
LOAD_THREADS="${LOAD_THREADS:-6}"
started_at=$(date +%s)

cargo build --locked --quiet --bin convrag
convrag="${CARGO_TARGET_DIR:-$root/target}/debug/convrag"
[ -x "$convrag" ] || die "no convrag binary at $convrag"

work="$(mktemp -d /tmp/convrag-multinode.XXXXXX)"
chmod 755 "$work"
pids=()
database=""
batch_databases=()
admin_url=""
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "$database" "${batch_databases[@]}"; do
    [ -n "$d" ] && psql "$admin_url" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
# The whole script stops by itself: a watchdog ends it after 6 minutes whatever happens.
( sleep 360; echo "multinode-test: timed out" >&2; kill -TERM $$ ) &
pids+=($!)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {  # PORT WHAT
  for _ in $(seq 1 300); do
    (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  die "$2 did not listen on port $1"
}

# A database of its own on the test server, migrated directly (never through PgBouncer).
admin_url="$(./scripts/test-database.sh)"
database="convrag_multinode_$(date +%s)_$$"
psql "$admin_url" -qc "CREATE DATABASE $database" >/dev/null
direct_url="${admin_url%/*}/$database"
pg_hostport="$(python3 -c 'import sys, urllib.parse as u; p=u.urlparse(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 5432, p.username or "postgres")' "$admin_url")"
read -r pg_host pg_port pg_user <<<"$pg_hostport"
DATABASE_URL="$direct_url" "$convrag" --home "$work/migrate" migrate >/dev/null

# PgBouncer, transaction pooling, as docs/deploy.md configures it.
bouncer_port="$(free_port)"
printf '"%s" ""\n' "$pg_user" >"$work/users.txt"
cat >"$work/pgbouncer.ini" <<INI
[databases]
* = host=$pg_host port=$pg_port user=$pg_user
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $work/users.txt
pool_mode = transaction
default_pool_size = 8
max_client_conn = 200
server_reset_query = DEALLOCATE ALL
server_reset_query_always = 1
ignore_startup_parameters = extra_float_digits
INI
chmod 644 "$work/pgbouncer.ini" "$work/users.txt"
bouncer_user=()
[ "$(id -u)" -eq 0 ] && bouncer_user=(-u nobody)   # PgBouncer refuses to run as root
/usr/sbin/pgbouncer "${bouncer_user[@]}" "$work/pgbouncer.ini" >"$work/pgbouncer.log" 2>&1 &
pids+=($!)
wait_port "$bouncer_port" pgbouncer
pooled_url="postgres://$pg_user@127.0.0.1:$bouncer_port/$database?pgbouncer=true"

# One collection, indexed once and copied to every node's data directory.
admin_token="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
"$convrag" --home "$work/node1" index --collection recipes --format jsonl tests/fixtures/jsonl/recipes.jsonl >/dev/null 2>&1
for n in 2 3; do mkdir -p "$work/node$n/collections" && cp -r "$work/node1/collections/recipes" "$work/node$n/collections/"; done
ports=("" "$(free_port)" "$(free_port)" "$(free_port)")
server_pids=("" "" "" "")
start_server() {  # N
  DATABASE_URL="$pooled_url" CONVRAG_HOME="$work/node$1" CONVRAG_ADMIN_TOKEN="$admin_token" RUST_LOG=warn \
    "$convrag" serve --bind "127.0.0.1:${ports[$1]}" >>"$work/server$1.log" 2>&1 &
  server_pids[$1]=$!
  pids+=($!)
  wait_port "${ports[$1]}" "server $1"
}
for n in 1 2 3; do start_server "$n"; done

# HAProxy in front of the three, checking /readyz every 500 ms.
proxy_port="$(free_port)"
cat >"$work/haproxy.cfg" <<CFG
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    retry-on conn-failure empty-response
    option redispatch
frontend convrag
    bind 127.0.0.1:$proxy_port
    default_backend servers
backend servers
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
    server node1 127.0.0.1:${ports[1]} check
    server node2 127.0.0.1:${ports[2]} check
    server node3 127.0.0.1:${ports[3]} check
CFG
haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)
wait_port "$proxy_port" haproxy
sleep 1   # first health checks

load() {  # URL SECONDS OUT
  python3 scripts/multinode-load.py load "$1" "$admin_token" "$LOAD_THREADS" "$2" "$3"
}
echo "== load through 1 server (direct, through PgBouncer)"
one="$(load "http://127.0.0.1:${ports[1]}" "$LOAD_SECONDS" "$work/load1.json")"
echo "$one"
echo "== load through HAProxy and 3 servers"
three="$(load "http://127.0.0.1:$proxy_port" "$LOAD_SECONDS" "$work/load3.json")"
echo "$three"
echo "== load through HAProxy; server 2 SIGKILLed after 4 s, restarted 4 s later"
kill_seconds=$((LOAD_SECONDS + 4))
load "http://127.0.0.1:$proxy_port" "$kill_seconds" "$work/loadkill.json" >"$work/loadkill.out" &
load_pid=$!
sleep 4
kill -9 "${server_pids[2]}"
killed_at=$(date +%s.%N)
sleep 4
start_server 2
wait "$load_pid"
cat "$work/loadkill.out"
python3 - "$work/loadkill.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
errors = r["errors"]
print(f"failed requests during the kill: {len(errors)}"
      + (f" (between {errors[0]['at']} s and {errors[-1]['at']} s: {sorted({e['what'] for e in errors})})" if errors else ""))
PY
python3 scripts/multinode-load.py verify "http://127.0.0.1:$proxy_port" "$work/load1.json" "$work/load3.json" "$work/loadkill.json"
after_kill_turns="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"])' "$work/loadkill.json")"
[ "$after_kill_turns" -gt 0 ] || die "no turn succeeded while a server was down"

# Batch: iKAT 2023 topics (three of them) over the cited passages, BM25 + extractive.
shared="${CONVRAG_SHARED_DATA:-$root/../shared/data}"
[ -f "$shared/ikat/official/2023_test_topics.json" ] || die "missing $shared/ikat/official (../shared/data)"
python3 - "$shared/ikat/official/2023_test_topics.json" "$work/topics.json" <<'PY'
import json, sys
topics = [t for t in json.load(open(sys.argv[1])) if t["number"] in ("9-1", "10-1", "13-1", "11-1")]
json.dump(topics, open(sys.argv[2], "w"))
PY
# Indexed once, copied to the second worker's node (workers refuse a run whose collection differs).
"$convrag" --home "$work/batch1" index --collection ikat --format ikat-passages \
  "$shared/ikat/official/2023_test_topics_psg_text.jsonl" >/dev/null 2>&1
mkdir -p "$work/batch2/collections" && cp -r "$work/batch1/collections/ikat" "$work/batch2/collections/"
# Each batch run in a database of its own, all under one run name (the name is in the file).
for n in 1 2 3; do
  batch_databases+=("${database}_b$n")
  psql "$admin_url" -qc "CREATE DATABASE ${database}_b$n" >/dev/null
  DATABASE_URL="${admin_url%/*}/${database}_b$n" "$convrag" --home "$work/migrate" migrate >/dev/null
done
run_batch() {  # N HOME OUTPUT [extra ...]: run `auto` in batch database N (call it in a subshell:
  # it becomes the convrag process, so `$!` is convrag's pid and SIGKILL reaches it)
  local db="${database}_b$1" home="$2" output="$3"
  shift 3
  DATABASE_URL="postgres://$pg_user@127.0.0.1:$bouncer_port/$db?pgbouncer=true" exec "$convrag" --home "$home" \
    run ikat --topics "$work/topics.json" --collection ikat --output "$output" --run-name auto \
    --depth 100 --passages 10 --jobs 1 --quiet "$@"
}
killed_url="${admin_url%/*}/${database}_b3"
stored_turns() {
  psql "$killed_url" -Atc "SELECT count(*) FROM turns t JOIN conversations c ON c.id = t.conversation_id WHERE t.is_current AND c.external_id LIKE 'auto/%'"
}
echo "== batch: 1 worker"
t0=$(date +%s.%N)
(run_batch 1 "$work/batch1" "$work/alone.json" --worker --worker-id solo 2>"$work/alone.log") ||
  { cat "$work/alone.log" >&2; die "the one-worker run failed"; }
t1=$(date +%s.%N)
echo "== batch: 2 workers"
run_batch 2 "$work/batch1" "$work/pair.json" --worker --worker-id w1 2>"$work/pair1.log" &
w1=$!; pids+=($w1)
run_batch 2 "$work/batch2" "$work/pair.json" --worker --worker-id w2 2>"$work/pair2.log" &
w2=$!; pids+=($w2)
wait "$w1" || { cat "$work/pair1.log" >&2; die "worker w1 failed"; }
wait "$w2" || { cat "$work/pair2.log" >&2; die "worker w2 failed"; }
t2=$(date +%s.%N)
cmp "$work/alone.json" "$work/pair.json" || die "2 workers wrote another file than 1"
echo "== batch: 2 workers, one SIGKILLed midway"
run_batch 3 "$work/batch1" "$work/killed.json" --worker --worker-id k1 --lease 3 2>"$work/killed1.log" &
k1=$!; pids+=($k1)
run_batch 3 "$work/batch2" "$work/killed.json" --worker --worker-id k2 --lease 3 2>"$work/killed2.log" &
k2=$!; pids+=($k2)
# Kill k1 while it holds a topic of which some turns are stored and some are not.
k1_mid_topic() {
  psql "$killed_url" -Atc "SELECT count(*) FROM batch_topic_leases l JOIN batch_runs r ON r.id = l.run_id \
    WHERE r.name = 'auto' AND l.worker = 'k1' AND l.done_at IS NULL AND EXISTS (SELECT 1 FROM turns t \
    JOIN conversations c ON c.id = t.conversation_id WHERE c.external_id = 'auto/' || l.topic_id)"
}
for _ in $(seq 1 600); do
  [ "$(k1_mid_topic)" = 1 ] && break
  sleep 0.02
done
kill -9 "$k1"
wait "$k1" 2>/dev/null || true
stored_at_kill="$(stored_turns)"
wait "$k2" || { cat "$work/killed2.log" >&2; die "the surviving worker failed"; }
grep -q "took over" "$work/killed2.log" || { cat "$work/killed2.log" >&2; die "worker k2 took nothing over"; }
cmp "$work/alone.json" "$work/killed.json" || die "the run finished after a SIGKILL differs from a one-process run"
total_turns="$(stored_turns)"
echo "batch: killed worker k1 with $stored_at_kill of $total_turns turns stored; k2 finished, file byte-identical"

python3 - "$t0" "$t1" "$t2" "$one" "$three" <<'PY'
import sys, re
t0, t1, t2 = map(float, sys.argv[1:4])
rate = lambda s: re.search(r"= ([0-9.]+) turns/s", s).group(1)
print("SUMMARY")
print(f"turns/s through 1 server: {rate(sys.argv[4])}; through HAProxy + 3 servers: {rate(sys.argv[5])}")
print(f"batch wall time: 1 worker {t1 - t0:.1f} s, 2 workers {t2 - t1:.1f} s")
PY
echo "multinode-test: passed in $(( $(date +%s) - started_at )) s"
