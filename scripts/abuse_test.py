#!/usr/bin/env python3
"""The cases of issue 53 against a running convrag server (see scripts/abuse-test.sh).

Standard library only; loopback only; every loop is bounded. Prints each case's figures and ends
with `N passed, 0 failed`; exits 1 when any check failed.
"""

import argparse
import http.client
import json
import socket
import threading
import time
import urllib.parse

MIB = 1 << 20
RSS_LIMIT = 300 * MIB
QRELS_BYTES = 8 * MIB  # limits.qrels_bytes, the default
PARALLEL_PUTS = 8
ODD_METHODS = 3000

results = []


def check(name, ok, figures):
    results.append(ok)
    print(f"abuse-test: {'ok  ' if ok else 'FAIL'} {name}: {figures}", flush=True)


class Api:
    def __init__(self, url, token=None):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port
        assert self.host == "127.0.0.1", "loopback only"
        self.token = token

    def request(self, method, path, body=None, content_type="application/json", timeout=60):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            if not isinstance(body, (bytes, bytearray)):
                body = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = data.decode(errors="replace")
        return response.status, parsed

    def with_token(self, token):
        api = Api(f"http://{self.host}:{self.port}")
        api.token = token
        return api


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def series(metrics_url):
    parsed = urllib.parse.urlsplit(metrics_url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    conn.request("GET", parsed.path)
    text = conn.getresponse().read().decode()
    conn.close()
    return sum(1 for line in text.splitlines() if line and not line.startswith("#")), len(text)


def new_user(admin, name):
    status, body = admin.request("POST", "/v1/users", {"name": name})
    assert status == 201, (status, body)
    return admin.with_token(body["token"])


def qrels_text(size):
    """`size` bytes of valid TREC qrels: many queries, each judging many documents."""
    out = bytearray()
    i = 0
    while len(out) < size - 64:
        out += f"{i // 1000}_{i % 7} 0 doc{i:08d} {i % 4}\n".encode()
        i += 1
    out += b" " * (size - len(out))
    return bytes(out), i


def raw_exchange(api, head, body_bytes, every, give_up):
    """Sends `head`, then one byte of `body_bytes` every `every` seconds until the server
    answers; returns (status, seconds)."""
    started = time.monotonic()
    sock = socket.create_connection((api.host, api.port), timeout=give_up)
    sock.sendall(head)
    sock.settimeout(every)
    answer = b""
    sent = 0
    try:
        while time.monotonic() - started < give_up:
            try:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
                if b"\r\n\r\n" in answer:
                    break
            except socket.timeout:
                if sent < len(body_bytes):
                    try:
                        sock.sendall(body_bytes[sent : sent + 1])
                    except OSError:
                        pass
                    sent += 1
    except OSError:
        pass
    finally:
        sock.close()
    took = time.monotonic() - started
    parts = answer.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, took, answer


def case_qrels(api, admin, pid):
    """8 parallel maximum-size qrels PUTs, twice; another user's reads meanwhile."""
    owner = new_user(admin, "qrels-owner")
    other = new_user(admin, "bystander")
    text, lines = qrels_text(QRELS_BYTES)
    # Warm the allocator and the connection pool with one small text (the bystander's: the
    # owner's 8 texts of 8 MiB are exactly its limits.qrels_bytes_per_user, 64 MiB).
    status, body = other.request("PUT", "/v1/qrels/warm", text[:4096].rsplit(b"\n", 1)[0] + b"\n",
                                 "text/plain")
    assert status == 200, (status, body)
    baseline = rss_bytes(pid)
    peak = [baseline]
    latencies = []
    statuses = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes(pid))
            time.sleep(0.05)

    def bystander():
        while not done.is_set():
            t0 = time.monotonic()
            status, _ = other.request("GET", "/v1/conversations", timeout=30)
            latencies.append((time.monotonic() - t0, status))
            time.sleep(0.1)

    def put(i):
        status, body = owner.request("PUT", f"/v1/qrels/big{i}", text, "text/plain", timeout=300)
        statuses.append((status, body.get("qrels", {}).get("judgments") if isinstance(body, dict) else body))

    threads = [threading.Thread(target=sample), threading.Thread(target=bystander)]
    for t in threads:
        t.start()
    started = time.monotonic()
    for _ in range(2):  # the second round replaces the first's texts
        puts = [threading.Thread(target=put, args=(i,)) for i in range(PARALLEL_PUTS)]
        for t in puts:
            t.start()
        for t in puts:
            t.join(timeout=600)
    took = time.monotonic() - started
    time.sleep(1.0)
    done.set()
    for t in threads:
        t.join(timeout=60)
    after = rss_bytes(pid)
    grown_peak, grown_after = peak[0] - baseline, after - baseline
    ok_puts = sum(1 for s, _ in statuses if s == 200)
    check(
        "16 qrels PUTs of 8 MiB (8 at a time) all stored",
        ok_puts == 2 * PARALLEL_PUTS and all(j is not None and j >= lines - 1 for _, j in statuses),
        f"{ok_puts}/{2 * PARALLEL_PUTS} stored ({lines} judgments each) in {took:.1f} s; "
        f"statuses {sorted({s for s, _ in statuses})}",
    )
    check(
        "RSS growth < 300 MB through the PUTs",
        grown_peak < RSS_LIMIT,
        f"baseline {baseline / MIB:.0f} MiB, peak {peak[0] / MIB:.0f} MiB (+{grown_peak / MIB:.0f} MiB)",
    )
    check(
        "RSS growth < 300 MB after the PUTs",
        grown_after < RSS_LIMIT,
        f"after {after / MIB:.0f} MiB (+{grown_after / MIB:.0f} MiB)",
    )
    worst = max((t for t, _ in latencies), default=float("inf"))
    failed = [s for _, s in latencies if s != 200]
    check(
        "another user's GET /v1/conversations within 1 s meanwhile",
        latencies and worst < 1.0 and not failed,
        f"{len(latencies)} requests, slowest {worst * 1000:.0f} ms, non-200: {failed}",
    )
    # The texts can be deleted, and the account with them.
    status, _ = owner.request("DELETE", "/v1/qrels/big0")
    check("DELETE /v1/qrels/{name}", status == 204, f"status {status}")
    status, _ = owner.request("DELETE", "/v1/users/me")
    time.sleep(0.5)
    final = rss_bytes(pid)
    check(
        "RSS growth < 300 MB after deleting the user",
        status == 204 and final - baseline < RSS_LIMIT,
        f"status {status}, RSS {final / MIB:.0f} MiB (+{(final - baseline) / MIB:.0f} MiB)",
    )


def case_metrics(api, metrics_url):
    """3,000 made-up HTTP methods: the /metrics series count does not change."""
    def odd(method):
        sock = socket.create_connection((api.host, api.port), timeout=10)
        try:
            sock.sendall(f"{method} /v1/conversations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            while sock.recv(4096):
                pass
        except OSError:
            pass
        finally:
            sock.close()

    odd("WARMUP")  # creates the one `other` series of this route
    before, _ = series(metrics_url)
    started = time.monotonic()
    for i in range(ODD_METHODS):
        # Some long names too (the probe's were 4,000 characters).
        odd(f"M{i}" if i % 100 else "X" * 4000 + str(i))
    after, size = series(metrics_url)
    check(
        f"/metrics series unchanged by {ODD_METHODS:,} odd methods",
        after == before,
        f"{before} series before, {after} after ({size:,} bytes), {time.monotonic() - started:.1f} s",
    )


def case_deadlines(api, user, body_read_secs, upload_deadline_secs):
    """Slow JSON bodies (sign-in, 20 at once) and a slow upload are cut at their deadlines."""
    head = (
        f"POST /v1/sign-in HTTP/1.1\r\nHost: {api.host}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n"
    ).encode()
    outcomes = []

    def slow():
        outcomes.append(raw_exchange(api, head, b'{"code": "' + b"a" * 1000, 1.0, 60))

    threads = [threading.Thread(target=slow) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    statuses = sorted({s for s, _, _ in outcomes})
    slowest = max(t for _, t, _ in outcomes)
    check(
        "20 slow JSON bodies (a byte a second) cut with 408",
        statuses == [408] and len(outcomes) == 20 and slowest < body_read_secs + 3,
        f"statuses {statuses}, cut after {min(t for _, t, _ in outcomes):.1f}-{slowest:.1f} s "
        f"(limits.body_read_secs = {body_read_secs})",
    )
    request_timeout = all(b'"request_timeout"' in a for _, _, a in outcomes)
    check("their answers are the JSON error request_timeout", request_timeout, "code request_timeout")

    status, body = user.request("POST", "/v1/collections", {"name": "slow"})
    assert status == 201, (status, body)
    boundary = "abuse-test-boundary"
    part = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n"
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    head = (
        f"POST /v1/collections/slow/documents HTTP/1.1\r\nHost: {api.host}\r\n"
        f"Authorization: Bearer {user.token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: 5000\r\n\r\n"
    ).encode() + part
    status, took, _ = raw_exchange(api, head, b"a" * 4000, 1.0, 60)
    check(
        "a slow upload (a byte a second, never idle) cut with 408",
        status == 408 and took < upload_deadline_secs + 3,
        f"status {status} after {took:.1f} s (uploads.deadline_secs = {upload_deadline_secs})",
    )


def case_revocation(user):
    status, body = user.request("POST", "/v1/users/me/tokens", {"name": "parent"})
    assert status == 201, (status, body)
    parent_id, parent = body["token_info"]["id"], user.with_token(body["token"])
    status, body = parent.request("POST", "/v1/users/me/tokens", {"name": "child"})
    assert status == 201, (status, body)
    child = user.with_token(body["token"])
    before, _ = child.request("GET", "/v1/conversations")
    status, _ = user.request("DELETE", f"/v1/users/me/tokens/{parent_id}")
    after, body = child.request("GET", "/v1/conversations")
    code = body.get("error", {}).get("code") if isinstance(body, dict) else body
    check(
        "a revoked parent's child token refused",
        before == 200 and status == 204 and after == 401 and code == "token_revoked",
        f"child before {before}, revoke {status}, child after {after} {code}",
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--admin-token", required=True)
    parser.add_argument("--body-read-secs", type=int, required=True)
    parser.add_argument("--upload-deadline-secs", type=int, required=True)
    args = parser.parse_args()
    api = Api(args.url)
    admin = api.with_token(args.admin_token)
    case_qrels(api, admin, args.pid)
    case_metrics(api, args.metrics)
    user = new_user(admin, "slow-sender")
    case_deadlines(api, user, args.body_read_secs, args.upload_deadline_secs)
    case_revocation(user)
    passed = sum(1 for r in results if r)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
