#!/usr/bin/env bash
# The metrics an operator scrapes, checked by Prometheus's own tools (Debian's `prometheus`
# package, installed here; its service is never started on the machine's ports):
#   1. a real `convrag serve` (a fresh database on the test server, the diet fixture collection)
#      answers one turn; its `--metrics-bind` page passes `promtool check metrics`;
#   2. docs/prometheus/convrag-rules.yml passes `promtool check rules`, and every series the rules
#      and docs/grafana/convrag-dashboard.json query is one the page exports;
#   3. a private Prometheus scrapes the server and its HTTP API returns the turn counter.
#
#   scripts/metrics-test.sh        (builds the debug binary if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

die() { echo "metrics-test: error: $*" >&2; exit 1; }
. scripts/server-line.sh
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v promtool >/dev/null || [ ! -x /usr/bin/prometheus ]; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  as_root sh -c "systemctl disable --now prometheus >/dev/null 2>&1 || service prometheus stop >/dev/null 2>&1 || true"
fi
[ "${1:-}" = "--install" ] && exit 0

bin="${CONVRAG_BIN:-${CARGO_TARGET_DIR:-target}/debug/convrag}"
[ -x "$bin" ] || cargo build --locked --quiet --bin convrag

work="$(mktemp -d "${TMPDIR:-/tmp}/convrag-metrics.XXXXXX")"
server_pid="" prom_pid="" database="" admin_url=""
cleanup() {
  for pid in "$prom_pid" "$server_pid"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  [ -z "$database" ] || psql "$admin_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. A server with one answered turn.
home="$work/home"
mkdir -p "$home"
"$bin" --home "$home" index --collection diet --format jsonl tests/fixtures/jsonl/diet.jsonl >/dev/null 2>&1 ||
  die "indexing the diet fixture failed"
admin_url="$(./scripts/test-database.sh)"
database="convrag_metrics_$(date +%s)_$$"
psql "$admin_url" -qc "CREATE DATABASE $database" >/dev/null
metrics_port="$(free_port)"
env -u CONVRAG_LLM_BASE_URL DATABASE_URL="${admin_url%/*}/$database" CONVRAG_HOME="$home" \
  CONVRAG_ADMIN_TOKEN=metrics-test-admin RUST_LOG=warn \
  "$bin" serve --bind 127.0.0.1:0 --metrics-bind "127.0.0.1:$metrics_port" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
url="$(server_line "$work/server.out" "$work/server.err" "$server_pid" 30 "$LISTENING_SED" address)" || exit 1

json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
token="$(curl -sf -H 'Authorization: Bearer metrics-test-admin' -H 'Content-Type: application/json' \
  -d '{"name": "operator"}' "$url/v1/users" | json "['token']")"
conversation="$(curl -sf -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"title": "metrics", "collection": "diet"}' "$url/v1/conversations" | json "['conversation']['id']")"
curl -sf -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"utterance": "Which beans are high in protein?"}' "$url/v1/conversations/$conversation/turns" ||
  die "the turn failed"

curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics.txt" || die "no page on --metrics-bind"
grep -q '^convrag_turns_total{outcome="answered"} 1$' "$work/metrics.txt" ||
  die "the page does not count the one turn: $(grep convrag_turns_total "$work/metrics.txt" || true)"
# promtool lints names, units, HELP and TYPE; it prints problems and exits non-zero on any.
promtool check metrics <"$work/metrics.txt" || die "promtool check metrics found problems (above)"
echo "metrics-test: promtool check metrics: $(grep -c '^# TYPE' "$work/metrics.txt") metric families, no problems"

# 2. The rules and the dashboard query series the page exports.
promtool check rules docs/prometheus/convrag-rules.yml
python3 - "$work/metrics.txt" docs/prometheus/convrag-rules.yml docs/grafana/convrag-dashboard.json <<'EOF'
import json, re, sys
page, rules, dashboard = sys.argv[1:]
families = set(re.findall(r"^# TYPE (\S+) (\S+)", open(page).read(), re.M))
exported = set()
for name, kind in families:
    exported.add(name)
    if kind == "histogram":
        exported |= {name + "_bucket", name + "_sum", name + "_count"}
exprs = re.findall(r"expr: \|?\s*\n?((?:.|\n)*?)(?=\n\s+(?:for|labels):)", open(rules).read())
exprs += [t["expr"] for p in json.load(open(dashboard))["panels"] for t in p["targets"]]
used = {m for e in exprs for m in re.findall(r"\b(convrag_[a-z0-9_]+)", e)}
missing = sorted(used - exported)
if missing:
    sys.exit(f"metrics-test: error: rules or dashboard query series the server does not export: {missing}")
print(f"metrics-test: {len(exprs)} rule and panel queries use {len(used)} exported series")
EOF

# 3. A real Prometheus scrapes it; its API answers a query for the turn counter.
prom_port="$(free_port)"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
rule_files:
  - $root/docs/prometheus/convrag-rules.yml
scrape_configs:
  - job_name: convrag
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
promtool check config "$work/prometheus.yml" >/dev/null
/usr/bin/prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
query="convrag_turns_total%7Boutcome%3D%22answered%22%7D"
value=""
for _ in $(seq 1 60); do
  value="$(curl -sf "http://127.0.0.1:$prom_port/api/v1/query?query=$query" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true)"
  [ -n "$value" ] && break
  kill -0 "$prom_pid" 2>/dev/null || { cat "$work/prometheus.log" >&2; die "prometheus exited"; }
  sleep 1
done
[ "$value" = "1" ] || { tail -20 "$work/prometheus.log" >&2; die "Prometheus's query for the turn counter returned '${value}', not 1"; }
up="$(curl -sf "http://127.0.0.1:$prom_port/api/v1/query?query=up%7Bjob%3D%22convrag%22%7D" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')"
[ "$up" = "1" ] || die "up{job=\"convrag\"} is $up"
echo "metrics-test: Prometheus $(/usr/bin/prometheus --version 2>&1 | head -1 | awk '{print $3}') scraped convrag: up=1, convrag_turns_total{outcome=\"answered\"}=1"
