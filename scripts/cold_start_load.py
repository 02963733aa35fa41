#!/usr/bin/env python3
"""Cold-start load of convrag (stdlib only; started by scripts/cold-start-load.sh).

`convrag serve` starts on an empty home whose default collection is Cranfield (each document one
HTML page, written from ../shared/data/classic-ir/cranfield/cran.all.1400). The server builds the
collection in the background, then computes its passage vectors; the run waits until
`GET /v1/collections` reports the collection `ready` with `vectors: ready`, and then:

1. cold: the first TURNS turns the server ever answers (25 conversations of 4 Cranfield queries,
   `retrieval: hybrid`, reranked, extractive answers), CONCURRENCY at a time;
2. warm: the same load again on new conversations, once with `retrieval: bm25` and once with
   `hybrid`, for throughput side by side.

Every turn must answer 201 with the retrieval it asked for (no BM25 fallback); any other answer
fails the run. It prints one JSON report: build times, and per phase turns/s and latency
percentiles (from a turn's request to its response).
"""

import argparse
import http.client
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

ADMIN = "cold-start-admin"


def log(msg):
    print(f"cold-start: {msg}", file=sys.stderr, flush=True)


def request(port, method, path, body=None, token=None, timeout=300):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, (json.loads(data) if data else None)


def cranfield(path):
    """(id, title, text) of each document of a SMART file (.I/.T/.A/.B/.W)."""
    docs, field, cur = [], None, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            m = re.match(r"^\.([ITABW])\b ?(.*)$", line)
            if m:
                field = m.group(1)
                if field == "I":
                    cur = {"id": m.group(2).strip(), "T": [], "W": []}
                    docs.append(cur)
                continue
            if cur is not None and field in ("T", "W"):
                cur[field].append(line)
    return [(d["id"], " ".join(d["T"]).strip(), " ".join(d["W"]).strip()) for d in docs]


def queries(path):
    """Cranfield's queries in file order (their .W text)."""
    out, cur = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.startswith(".I"):
                cur = []
                out.append(cur)
            elif line.startswith(".W"):
                continue
            elif cur is not None:
                cur.append(line.strip())
    return [" ".join(q).strip() for q in out if q]


def write_pages(docs, out_dir):
    import html

    os.makedirs(out_dir, exist_ok=True)
    for doc_id, title, text in docs:
        page = (f"<!DOCTYPE html><html><head><title>{html.escape(title or doc_id)}</title></head>"
                f"<body><h1>{html.escape(title or doc_id)}</h1><p>{html.escape(text)}</p></body></html>\n")
        with open(os.path.join(out_dir, f"cran-{int(doc_id):04d}.html"), "w", encoding="utf-8") as f:
            f.write(page)


def percentile(values, p):
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def wait_ready(port, token, name, deadline_s):
    """Seconds until the collection is listed ready, and until its vectors are."""
    started = time.monotonic()
    collection_ready = None
    last = None
    while time.monotonic() - started < deadline_s:
        try:
            status, body = request(port, "GET", "/v1/collections", token=token, timeout=10)
        except OSError:
            time.sleep(0.5)
            continue
        if status == 200:
            for c in body["collections"]:
                if c["name"] != name:
                    continue
                vectors = (c.get("vectors") or {}).get("status")
                state = (c.get("status"), vectors)
                if state != last:
                    log(f"{name}: status {state[0]}, vectors {state[1]} at {time.monotonic() - started:.1f} s")
                    last = state
                if c.get("status") == "ready" and collection_ready is None:
                    collection_ready = time.monotonic() - started
                if c.get("status") == "ready" and vectors == "ready":
                    return collection_ready, time.monotonic() - started, c
        time.sleep(0.2)
    raise SystemExit(f"cold-start: {name} not ready with vectors within {deadline_s} s (last: {last})")


def run_phase(port, tokens, collection, utterances, retrieval, turns, per_conversation, concurrency, tag):
    """`turns` turns in conversations of `per_conversation`, `concurrency` at a time."""
    jobs = queue.Queue()
    n_conv = (turns + per_conversation - 1) // per_conversation
    for c in range(n_conv):
        token = tokens[c % len(tokens)]
        status, body = request(port, "POST", "/v1/conversations",
                               {"title": f"{tag} {c}", "collection": collection}, token)
        if status != 201:
            raise SystemExit(f"cold-start: creating a conversation: {status} {body}")
        start = (c * per_conversation) % len(utterances)
        said = [utterances[(start + i) % len(utterances)] for i in range(per_conversation)]
        jobs.put((token, body["conversation"]["id"], said[: turns - c * per_conversation]))
    latencies, errors, lock = [], [], threading.Lock()

    def worker():
        while True:
            try:
                token, conv, said = jobs.get_nowait()
            except queue.Empty:
                return
            for utterance in said:
                body = {"utterance": utterance, "retrieval": retrieval, "generator": "extractive"}
                t = time.monotonic()
                status, reply = request(port, "POST", f"/v1/conversations/{conv}/turns", body, token)
                elapsed = time.monotonic() - t
                with lock:
                    if status != 201:
                        errors.append(f"{status} {reply}")
                        continue
                    used = reply["turn"]["diagnostics"].get("retrieval")
                    if used != retrieval:
                        errors.append(f"asked for {retrieval}, ran {used}: {reply['turn']['diagnostics']}")
                    latencies.append(elapsed)

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    if errors:
        raise SystemExit(f"cold-start: {tag}: {len(errors)} failed turns, first: {errors[0]}")
    ms = lambda s: round(s * 1000.0, 1)  # noqa: E731
    return {
        "retrieval": retrieval,
        "turns": len(latencies),
        "concurrency": concurrency,
        "seconds": round(wall, 2),
        "turns_per_s": round(len(latencies) / wall, 2),
        "p50_ms": ms(percentile(latencies, 50)),
        "p95_ms": ms(percentile(latencies, 95)),
        "p99_ms": ms(percentile(latencies, 99)),
        "max_ms": ms(max(latencies)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--ort", required=True)
    ap.add_argument("--data", required=True, help="the cranfield directory (cran.all.1400, cran.qry)")
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--warm-turns", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--per-conversation", type=int, default=4)
    ap.add_argument("--users", type=int, default=8)
    args = ap.parse_args()

    docs = cranfield(os.path.join(args.data, "cran.all.1400"))
    utterances = queries(os.path.join(args.data, "cran.qry"))
    pages = os.path.join(args.work, "cranfield-html")
    write_pages(docs, pages)
    log(f"{len(docs)} documents as HTML pages, {len(utterances)} queries")

    env = dict(os.environ)
    env.update({
        "CONVRAG_HOME": args.home,
        "DATABASE_URL": args.database_url,
        "CONVRAG_ADMIN_TOKEN": ADMIN,
        "CONVRAG_DEFAULT_COLLECTION": "cranfield",
        "CONVRAG_DEFAULT_COLLECTION_SOURCE": pages,
        "CONVRAG_MODEL_DIR": args.model_dir,
        "ORT_DYLIB_PATH": args.ort,
        "CONVRAG_LIMIT_TURNS_PER_MINUTE": "0",
        "RUST_LOG": env.get("RUST_LOG", "info"),
    })
    for k in ("CONVRAG_CONFIG", "CONVRAG_LLM_BASE_URL"):
        env.pop(k, None)
    server_log = open(os.path.join(args.work, "server.log"), "w")
    started = time.monotonic()
    proc = subprocess.Popen([args.binary, "serve", "--bind", f"127.0.0.1:{args.port}"],
                            env=env, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                status, _ = request(args.port, "GET", "/healthz", timeout=2)
                if status < 500:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"cold-start: the server exited ({proc.returncode}); see {server_log.name}")
            time.sleep(0.2)
        listening = time.monotonic() - started
        tokens = []
        for u in range(args.users):
            status, body = request(args.port, "POST", "/v1/users", {"name": f"load{u}"}, ADMIN)
            if status != 201:
                raise SystemExit(f"cold-start: creating a user: {status} {body}")
            tokens.append(body["token"])
        built, vectors_ready, listed = wait_ready(args.port, tokens[0], "cranfield", 3600)
        build = {
            "documents": len(docs),
            "passages": listed.get("passages"),
            "server_listening_s": round(listening, 1),
            "collection_ready_s": round(built, 1),
            "vectors_ready_s": round(vectors_ready, 1),
        }
        log(f"build: {build}")
        phases = {}
        per = args.per_conversation
        phases["cold_hybrid"] = run_phase(args.port, tokens, "cranfield", utterances, "hybrid",
                                          args.turns, per, args.concurrency, "cold")
        log(f"cold: {phases['cold_hybrid']}")
        # Warm: other queries first, then the same load by each mode.
        warm_utterances = utterances[args.turns:] + utterances[: args.turns]
        for mode in ("bm25", "hybrid"):
            phases[f"warm_{mode}"] = run_phase(args.port, tokens, "cranfield", warm_utterances, mode,
                                               args.warm_turns, per, args.concurrency, f"warm {mode}")
            log(f"warm {mode}: {phases[f'warm_{mode}']}")
        print(json.dumps({"build": build, "phases": phases, "cores": os.cpu_count()}, indent=2))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server_log.close()


if __name__ == "__main__":
    main()
