"""Shared set-up of the client tests against the second server scripts/client-tests.sh starts:
no LLM (extractive answers, about a second a turn) and a tiny turn rate
(CONVRAG_LIMIT_TURNS_PER_MINUTE, CONVRAG_CLIENTS_TURNS_PER_MINUTE here), so a rate-limited
request is reached in a few quick turns and stays refused for many seconds.

The script exports CONVRAG_CLIENTS_URL, CONVRAG_CLIENTS_ADMIN, CONVRAG_CLIENTS_COLLECTION and
CONVRAG_CLIENTS_TURNS_PER_MINUTE. Standard library only: the same file serves the main client
venv and the LlamaIndex one.
"""

import json
import os
import time
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
COLLECTION = os.environ.get("CONVRAG_CLIENTS_COLLECTION", "diet")
TURNS_PER_MINUTE = int(_required("CONVRAG_CLIENTS_TURNS_PER_MINUTE"))
# Extractive turns take about a second; generous for a busy 2-core machine.
TIMEOUT = 120
FIRST = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"
BAD_TOKEN = "not-a-convrag-token"
# The server's reason for refusing BAD_TOKEN, which every client must let the user read.
BAD_TOKEN_REASON = "unknown token"


def api(method, path, token, body=None):
    """A plain HTTP call to convrag's own API; returns (status, headers, JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(URL + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            raw = response.read()
            return response.status, response.headers, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, e.headers, (json.loads(raw) if raw else None)


@pytest.fixture
def token():
    """A fresh user's token: rates are per user, so each test has a full bucket of turns."""
    status, _, body = api("POST", "/v1/users", ADMIN, {"name": f"limited-{uuid.uuid4().hex[:12]}"})
    assert status == 201, body
    return body["token"]


def exhaust_turns(token):
    """Spends the user's turns with plain chat completions until the server refuses one with a
    429 whose Retry-After leaves the caller many seconds of refusal (a refusal just before a
    refill is spent through too); returns that Retry-After."""
    for _ in range(3 * TURNS_PER_MINUTE + 3):
        status, headers, body = api(
            "POST", "/v1/chat/completions", token,
            {"model": COLLECTION, "messages": [{"role": "user", "content": FIRST}]},
        )
        if status == 429:
            retry_after = int(headers["Retry-After"])
            if retry_after >= 10:
                return retry_after
            time.sleep(retry_after)
        else:
            assert status == 200, body
    raise AssertionError("the turn rate never refused a turn")


def single_conversation_with(token, utterances):
    """The user has exactly one conversation, whose turns are these utterances in order; returns
    its id."""
    status, _, body = api("GET", "/v1/conversations", token)
    assert status == 200, body
    conversations = body["conversations"]
    assert len(conversations) == 1, conversations
    conversation = conversations[0]["id"]
    status, _, body = api("GET", f"/v1/conversations/{conversation}/turns", token)
    assert status == 200, body
    assert [t["utterance"] for t in body["turns"]] == list(utterances)
    return conversation


def check_rate_limited(message):
    """The server's own reason for the refusal is in the client's error."""
    assert f"at most {TURNS_PER_MINUTE} turns per minute" in message, message
