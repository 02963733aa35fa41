#!/usr/bin/env python3
"""Load driver of scripts/multinode-test.sh (Python stdlib only).

  multinode-load.py load URL ADMIN_TOKEN THREADS SECONDS OUT.json
      THREADS users, each with a conversation of its own, post turns through URL for SECONDS;
      writes every acknowledged (201) turn id, every failed request (time, what) and turns/s.
  multinode-load.py verify URL OUT.json...
      reads every conversation back through URL and counts the acknowledged turns missing.
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

UTTERANCES = [
    "How do I make a vegetarian curry?",
    "Which one is quickest?",
    "Can I make it without dairy?",
    "What goes well with it?",
]


def call(method, url, token, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text or b"null")
        except ValueError:  # HAProxy's own error pages are HTML
            return e.code, text.decode(errors="replace")[:80]


def retrying(fn, deadline):
    """Set-up calls (user, conversation) retry until they succeed: only turns are measured."""
    while True:
        try:
            status, body = fn()
            if status == 201:
                return body
        except OSError:
            pass
        if time.time() > deadline:
            raise SystemExit("set-up request kept failing")
        time.sleep(0.2)


def load(url, admin, threads, seconds, out):
    results = {"acknowledged": {}, "tokens": {}, "errors": [], "turns": 0}
    lock = threading.Lock()
    start = time.time()
    end = start + seconds

    def worker(i):
        name = f"load-{uuid.uuid4().hex[:12]}"
        user = retrying(lambda: call("POST", f"{url}/v1/users", admin, {"name": name}), end + 60)
        token = user["token"]
        conv = retrying(
            lambda: call("POST", f"{url}/v1/conversations", token,
                         {"title": name, "collection": "recipes"}),
            end + 60,
        )["conversation"]["id"]
        with lock:
            results["tokens"][conv] = token
            results["acknowledged"][conv] = []
        n = 0
        while time.time() < end:
            utterance = UTTERANCES[n % len(UTTERANCES)]
            n += 1
            try:
                status, body = call("POST", f"{url}/v1/conversations/{conv}/turns", token,
                                    {"utterance": utterance})
            except OSError as e:
                status, body = None, str(e)
            with lock:
                if status == 201:
                    results["acknowledged"][conv].append(body["turn"]["id"])
                    results["turns"] += 1
                else:
                    what = body["error"]["code"] if isinstance(body, dict) and "error" in body else str(body)[:80]
                    results["errors"].append({"at": round(time.time() - start, 2), "status": status, "what": what})
                    time.sleep(0.1)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    results["seconds"] = round(time.time() - start, 2)
    results["turns_per_s"] = round(results["turns"] / seconds, 2)
    with open(out, "w") as f:
        json.dump(results, f)
    print(f"{results['turns']} turns in {seconds} s = {results['turns_per_s']} turns/s, "
          f"{len(results['errors'])} failed requests")


def verify(url, files):
    acknowledged = missing = 0
    for path in files:
        with open(path) as f:
            results = json.load(f)
        for conv, ids in results["acknowledged"].items():
            status, body = call("GET", f"{url}/v1/conversations/{conv}/turns", results["tokens"][conv])
            if status != 200:
                raise SystemExit(f"reading conversation {conv}: {status} {body}")
            stored = {t["id"] for t in body["turns"]}
            acknowledged += len(ids)
            missing += sum(1 for i in ids if i not in stored)
    print(f"acknowledged turns: {acknowledged}, missing: {missing}")
    if missing:
        raise SystemExit(1)


if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    elif sys.argv[1] == "verify":
        verify(sys.argv[2], sys.argv[3:])
    else:
        raise SystemExit(__doc__)
