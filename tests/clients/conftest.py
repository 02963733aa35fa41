"""Shared set-up of the client tests: the server scripts/client-tests.sh started, and users.

The script exports CONVRAG_CLIENTS_URL (the server), CONVRAG_CLIENTS_ADMIN (its administrator
token), CONVRAG_CLIENTS_BIN (the convrag binary, for `convrag mcp`) and CONVRAG_CLIENTS_COLLECTION.
"""

import json
import os
import urllib.error
import urllib.request
import uuid

import pytest


def _required(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through scripts/client-tests.sh")
    return value


URL = _required("CONVRAG_CLIENTS_URL").rstrip("/")
ADMIN = _required("CONVRAG_CLIENTS_ADMIN")
BIN = _required("CONVRAG_CLIENTS_BIN")
COLLECTION = os.environ.get("CONVRAG_CLIENTS_COLLECTION", "diet")
# A turn with the small local LLM can take a while on a busy machine.
TIMEOUT = 600


def api(method, path, token, body=None):
    """A plain HTTP call to convrag's own API; returns (status, JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(URL + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)


def raw(method, path, headers=None, body=None):
    """An HTTP call with exactly these headers; returns (status, lower-cased headers, text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(URL + path, data=data, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


@pytest.fixture
def token():
    """A fresh user's token (each test starts with no conversations and no profile)."""
    status, body = api("POST", "/v1/users", ADMIN, {"name": f"client-{uuid.uuid4().hex[:12]}"})
    assert status == 201, body
    return body["token"]
