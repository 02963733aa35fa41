#!/usr/bin/env python3
"""Loopback load-and-fault run for convrag (stdlib only; started by scripts/load-fault.sh).

It starts its own PostgreSQL cluster (initdb in a scratch directory, its own port; never the
machine's server), a tiny OpenAI-compatible LLM that answers with a fixed cited sentence after a
delay, and `convrag serve`. Workers run N turns over many users and conversations (the turns of
one conversation in order), each with an Idempotency-Key that every retry reuses. Faults are
injected mid-run, each once per round: PostgreSQL stopped then restarted, the LLM killed (turns
fall back to extractive answers) then restarted, the server SIGKILLed then restarted.

At the end it checks, against the database through the API: every acknowledged turn is stored
exactly as acknowledged and complete (stage timings, passages, response sentences, citations that
point at the turn's passages); nothing else is stored (no duplicates, no turn the client never got
acknowledged); positions are 1..k per conversation. It prints throughput and latency percentiles
and exits non-zero on any violation.
"""

import argparse
import http.client
import http.server
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

ANSWER = "Lentil soup with vegetables is a simple vegetarian dinner [1]. It is ready in about forty minutes [2]."
UTTERANCES = [
    "What should I cook for dinner tonight?",
    "Is lentil soup quick to make?",
    "What about something with chickpeas?",
    "Which of these is safe with a nut allergy?",
    "How long does it take to prepare?",
    "Can I freeze the leftovers?",
]


def log(msg):
    print(f"load-fault: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the LLM peer ----

def run_llm(port, delay):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "fixed", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            time.sleep(delay)
            text = ANSWER
            if request.get("stream"):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for word in text.split(" "):
                    chunk = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True
                return
            body = json.dumps({
                "id": "x", "object": "chat.completion", "model": "fixed",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Quiet(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a client that went away mid-answer (the server was killed) is expected here

    server = Quiet(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


# ---- processes ----

class Cluster:
    """A private PostgreSQL cluster owned by the unprivileged `postgres` user."""

    def __init__(self, work, port, bindir):
        self.data = os.path.join(work, "pgdata")
        self.sock = os.path.join(work, "pgsock")
        self.port = port
        self.bindir = bindir
        self.log = os.path.join(work, "postgres.log")
        os.makedirs(self.sock, exist_ok=True)
        for path in (work, self.sock):
            os.chmod(path, 0o777)
        self.as_postgres = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]

    def run(self, *args, check=True):
        return subprocess.run(self.as_postgres + [os.path.join(self.bindir, args[0]), *args[1:]],
                              check=check, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def init(self):
        self.run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def start(self):
        self.run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start", "-o",
                 f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off")

    def stop(self):
        self.run("pg_ctl", "-D", self.data, "-w", "-t", "60", "stop", "-m", "fast", check=False)

    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


class Server:
    def __init__(self, binary, home, port, env):
        self.binary, self.home, self.port, self.env = binary, home, port, env
        self.proc = None
        self.log = open(os.path.join(home, "..", "server.log"), "ab")

    def start(self):
        self.proc = subprocess.Popen([self.binary, "serve", "--bind", f"127.0.0.1:{self.port}"],
                                     env=self.env, stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"load-fault: the server exited while starting (see {self.log.name})")
            try:
                status, _, _ = request(self.port, "GET", "/readyz", None, None, timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit("load-fault: the server did not become ready within 120 s")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def request(port, method, path, body, token, key=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    if key:
        headers["idempotency-key"] = key
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        r = conn.getresponse()
        data = r.read()
        replayed = r.getheader("idempotent-replayed") == "true"
        return r.status, (json.loads(data) if data else None), replayed
    finally:
        conn.close()


# ---- the load ----

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = []
        self.attempts = 0
        self.failed_attempts = {}
        self.replays = 0
        # Replays after an error *answer* (not a lost connection): an error that had stored the
        # turn. Only a connection lost inside COMMIT may cause one; it should stay at 0.
        self.stored_despite_error = 0
        self.acked = {}  # key -> acknowledged turn
        self.gave_up = []

    def failure(self, what):
        with self.lock:
            self.failed_attempts[what] = self.failed_attempts.get(what, 0) + 1


def post_with_retries(port, path, body, token, key, stats, deadline_s, retry=True):
    """POSTs until acknowledged, reusing `key`; returns (body, seconds) or None when giving up
    (at once after the first failure without `retry`)."""
    started = time.time()
    pause = 0.1
    answered_error = False
    first = True
    while first or (retry and time.time() - started < deadline_s):
        first = False
        with stats.lock:
            stats.attempts += 1
        try:
            status, reply, replayed = request(port, "POST", path, body, token, key)
        except (OSError, http.client.HTTPException) as e:
            stats.failure(type(e).__name__)
        else:
            if status in (200, 201):
                if replayed:
                    with stats.lock:
                        stats.replays += 1
                        stats.stored_despite_error += answered_error
                return reply, time.time() - started
            code = (reply or {}).get("error", {}).get("code", str(status))
            if status < 500 and code != "conversation_busy":
                raise SystemExit(f"load-fault: {path}: refused {status} {reply}")
            stats.failure(code)
            answered_error = answered_error or status >= 500
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
    return None


def worker(port, jobs, stats, deadline_s, retry):
    while True:
        try:
            token, conv, turns = jobs.get_nowait()
        except queue.Empty:
            return
        for utterance, key in turns:
            body = {"utterance": utterance, "passages": 5, "max_words": 80}
            got = post_with_retries(port, f"/v1/conversations/{conv}/turns", body, token, key, stats,
                                    deadline_s, retry)
            with stats.lock:
                if got is None:
                    stats.gave_up.append(key)
                else:
                    stats.acked[key] = got[0]["turn"]
                    stats.latencies.append(got[1])


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def check_turn(turn):
    """Problems of one stored turn's completeness."""
    problems = []
    passages = turn.get("passages") or []
    sentences = turn.get("sentences") or []
    if not passages:
        problems.append("no passages")
    if not sentences:
        problems.append("no response sentences")
    for s in sentences:
        if not s.get("citations"):
            problems.append(f"uncited sentence {s.get('text')!r}")
        for c in s.get("citations", []):
            if not 1 <= c <= len(passages):
                problems.append(f"citation {c} outside 1..{len(passages)}")
    for stage in ("ptkb", "rewrite", "retrieve", "generate", "total"):
        if not isinstance((turn.get("timings_ms") or {}).get(stage), (int, float)):
            problems.append(f"no {stage} timing")
    if " ".join(s["text"] for s in sentences) != turn.get("response_text"):
        problems.append("sentences do not make up the response")
    return problems


def verify(port, conversations, stats):
    """Compares what is stored with what was acknowledged; returns the violations."""
    violations = []
    for token, conv, turns in conversations:
        status, reply, _ = request(port, "GET", f"/v1/conversations/{conv}/turns?all_versions=true", None, token)
        if status != 200:
            violations.append(f"{conv}: listing answered {status}")
            continue
        stored = reply["turns"]
        by_utterance = {}
        for t in stored:
            by_utterance.setdefault(t["utterance"], []).append(t)
            violations += [f"{conv} seq {t['seq']}: {p}" for p in check_turn(t)]
        for utterance, same in by_utterance.items():
            if len(same) > 1:
                violations.append(f"{conv}: {len(same)} stored turns for {utterance!r} (duplicates)")
        acked_ids = set()
        for utterance, key in turns:
            acked = stats.acked.get(key)
            if acked is None:
                if utterance in by_utterance:
                    violations.append(f"{conv}: {utterance!r} stored but never acknowledged")
                continue
            acked_ids.add(acked["id"])
            match = [t for t in stored if t["id"] == acked["id"]]
            if not match:
                violations.append(f"{conv}: acknowledged turn {acked['id']} is not stored")
            elif match[0] != acked:
                violations.append(f"{conv}: stored turn {acked['id']} differs from the acknowledged one")
        extra = [t["id"] for t in stored if t["id"] not in acked_ids]
        if extra:
            violations.append(f"{conv}: stored turns never acknowledged: {extra}")
        seqs = sorted(t["seq"] for t in stored)
        if seqs != list(range(1, len(seqs) + 1)):
            violations.append(f"{conv}: positions {seqs}")
    return violations


# ---- faults ----

def fault_plan(names, total, stats):
    """Runs each fault once when its share of the turns is acknowledged."""
    return [(name, int(total * (i + 1) / (len(names) + 1))) for i, name in enumerate(names)]


def inject(name, cluster, llm, server, outage):
    if name == "postgres":
        log(f"fault: PostgreSQL stopped for {outage} s")
        cluster.stop()
        time.sleep(outage)
        cluster.start()
        log("fault: PostgreSQL restarted")
    elif name == "llm":
        log(f"fault: LLM killed for {outage} s (turns fall back to extractive answers)")
        llm.kill()
        llm.wait()
        time.sleep(outage)
        llm.restart()
        log("fault: LLM restarted")
    elif name == "server":
        log("fault: server SIGKILLed, restarting")
        server.kill()
        time.sleep(1)
        server.start()
        log("fault: server restarted")


class LlmProcess:
    def __init__(self, port, delay):
        self.port, self.delay = port, delay
        self.restart()

    def restart(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "llm", "--port", str(self.port),
                                      "--delay", str(self.delay)])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)

    def wait(self):
        self.proc.wait()


def drive(args):
    work = args.work
    cluster = Cluster(work, free_port(), args.pg_bindir)
    cluster.init()
    cluster.start()
    llm = LlmProcess(free_port(), args.llm_delay)
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": cluster.url(),
        "CONVRAG_HOME": args.home,
        "CONVRAG_ADMIN_TOKEN": "load-fault-admin",
        "CONVRAG_LLM_BASE_URL": f"http://127.0.0.1:{llm.port}/v1",
        "CONVRAG_LLM_MODEL": "fixed",
        "CONVRAG_LLM_TIMEOUT_SECS": "5",
        "CONVRAG_TURN_LEASE_SECS": str(args.lease_secs),
        "RUST_LOG": env.get("RUST_LOG", "warn"),
    })
    env.pop("CONVRAG_CONFIG", None)
    server = Server(args.binary, args.home, free_port(), env)
    try:
        server.start()
        return run_load(args, cluster, llm, server)
    finally:
        server.stop()
        llm.kill()
        cluster.stop()


def setup_conversations(port, args):
    admin = "load-fault-admin"
    conversations = []
    per_conv = args.turns_per_conversation
    n_conv = -(-args.turns // per_conv)
    tokens = []
    for u in range(args.users):
        status, reply, _ = request(port, "POST", "/v1/users", {"name": f"user{u}"}, admin)
        assert status == 201, reply
        tokens.append(reply["token"])
    made = 0
    for c in range(n_conv):
        token = tokens[c % len(tokens)]
        body = {"title": f"c{c}", "collection": "diet", "ptkb": [{"text": "I am vegetarian."}, {"text": "I am allergic to nuts."}]}
        status, reply, _ = request(port, "POST", "/v1/conversations", body, token, key=f"conv-{c}")
        assert status == 201, reply
        turns = []
        for t in range(per_conv):
            if made == args.turns:
                break
            turns.append((f"{UTTERANCES[t % len(UTTERANCES)]} (c{c} t{t})", str(uuid.uuid4())))
            made += 1
        conversations.append((token, reply["conversation"]["id"], turns))
    return conversations


def run_load(args, cluster, llm, server):
    conversations = setup_conversations(server.port, args)
    jobs = queue.Queue()
    for c in conversations:
        jobs.put(c)
    stats = Stats()
    faults = fault_plan(args.faults, args.turns, stats) if args.faults else []
    started = time.time()
    workers = [threading.Thread(target=worker, args=(server.port, jobs, stats, args.turn_deadline, not args.no_retry))
               for _ in range(args.concurrency)]
    for w in workers:
        w.start()
    injected = {}
    for name, after in faults:
        while len(stats.acked) + len(stats.gave_up) < after and any(w.is_alive() for w in workers):
            time.sleep(0.05)
        injected[name] = len(stats.acked)
        inject(name, cluster, llm, server, args.outage)
    for w in workers:
        w.join()
    elapsed = time.time() - started
    violations = verify(server.port, conversations, stats)
    for name, acked in injected.items():
        if acked >= args.turns:
            violations.append(f"the {name} fault came after the load ended (make the run longer)")
    if stats.gave_up and not args.no_retry:
        violations.append(f"{len(stats.gave_up)} turns never acknowledged within {args.turn_deadline} s")
    fallbacks = sum(1 for t in stats.acked.values() if (t.get("diagnostics") or {}).get("fallback"))
    lat = stats.latencies
    summary = {
        "turns": args.turns, "acknowledged": len(stats.acked),
        "not_acknowledged": len(stats.gave_up), "concurrency": args.concurrency,
        "users": args.users, "conversations": len(conversations), "faults": args.faults,
        "attempts": stats.attempts, "failed_attempts": stats.failed_attempts, "replayed": stats.replays,
        "replayed_after_an_error_answer": stats.stored_despite_error,
        "extractive_fallbacks": fallbacks, "acknowledged_when_fault_began": injected,
        "seconds": round(elapsed, 1),
        "turns_per_second": round(len(stats.acked) / elapsed, 2),
        "latency_s": {"p50": round(percentile(lat, 50), 3), "p95": round(percentile(lat, 95), 3),
                      "p99": round(percentile(lat, 99), 3), "max": round(max(lat, default=0), 3)},
        "violations": len(violations),
    }
    print(json.dumps(summary, indent=2))
    for v in violations[:50]:
        log(f"VIOLATION: {v}")
    return 1 if violations else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    llm = sub.add_parser("llm", help="serve the fixed-answer LLM")
    llm.add_argument("--port", type=int, required=True)
    llm.add_argument("--delay", type=float, default=0.2)
    run = sub.add_parser("run", help="the load-and-fault run")
    run.add_argument("--binary", required=True)
    run.add_argument("--home", required=True, help="convrag home with the diet collection indexed")
    run.add_argument("--work", required=True, help="scratch directory for the cluster")
    run.add_argument("--pg-bindir", required=True)
    run.add_argument("--turns", type=int, default=60)
    run.add_argument("--concurrency", type=int, default=8)
    run.add_argument("--users", type=int, default=6)
    run.add_argument("--turns-per-conversation", type=int, default=5)
    # The LLM last: while it is down turns are quickest (extractive), so the load could end early.
    run.add_argument("--faults", default="server,postgres,llm",
                     type=lambda s: [f for f in s.split(",") if f])
    run.add_argument("--outage", type=float, default=4.0, help="seconds PostgreSQL / the LLM stay down")
    run.add_argument("--llm-delay", type=float, default=0.5)
    run.add_argument("--lease-secs", type=int, default=5)
    run.add_argument("--turn-deadline", type=float, default=180.0, help="a client's retry budget per turn")
    run.add_argument("--no-retry", action="store_true",
                     help="clients give up after one failed attempt: checks that no turn answered with an error is stored")
    args = parser.parse_args()
    if args.command == "llm":
        run_llm(args.port, args.delay)
        return 0
    for f in args.faults:
        if f not in ("postgres", "llm", "server"):
            parser.error(f"unknown fault {f!r} (postgres, llm, server)")
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
