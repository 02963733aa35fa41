"""convrag as a tool server for the official `mcp` Python SDK client, over stdio (`convrag mcp`,
a bridge to the server) and over the streamable HTTP transport (`/mcp`)."""

import json
from contextlib import asynccontextmanager

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, COLLECTION, TIMEOUT, URL, raw

EATING_OUT = "What should I check when I eat out?"
PEANUTS = "I have a peanut allergy, so I always check what is in my food when I eat out."
CYCLING = "I cycle to work in Edinburgh every day."
SHELLFISH = "I have a shellfish allergy, so I always check what is in my food when I eat out."


@asynccontextmanager
async def stdio_session(token):
    params = StdioServerParameters(command=BIN, args=["mcp", "--url", URL, "--token", token])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            yield session


@asynccontextmanager
async def http_session(token):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
        async with streamable_http_client(URL + "/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
                yield session


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def cited_text(answer):
    """The texts of the passages an answer cites, lower-cased."""
    return " ".join(p["text"].lower() for p in answer["passages"])


async def exercise(session):
    info = await session.initialize()
    assert info.server_info.name == "convrag"
    tools = {t.name for t in (await session.list_tools()).tools}
    assert {"search", "ask", "list_ptkb", "add_ptkb", "remove_ptkb"} <= tools

    found = await call(session, "search", {"collection": COLLECTION, "query": "peanut allergy", "k": 3})
    assert len(found["results"]) == 3
    assert "peanut" in found["results"][0]["text"].lower()

    # A first question starts a conversation; the answer cites what it returns.
    first = await call(session, "ask", {"collection": COLLECTION, "question": "What is a quick vegetarian dinner?"})
    conversation = first["conversation_id"]
    assert first["turn"] == 1
    assert first["passages"]
    for p in first["passages"]:
        assert f"[{p['n']}]" in first["answer"]

    # The PTKB changes the answer: the same question follows the statement the user holds.
    await call(session, "add_ptkb", {"conversation_id": conversation, "text": CYCLING})
    await call(session, "add_ptkb", {"conversation_id": conversation, "text": PEANUTS})
    statements = (await call(session, "list_ptkb", {"conversation_id": conversation}))["statements"]
    assert [s["text"] for s in statements] == [CYCLING, PEANUTS]
    with_peanuts = await call(session, "ask", {"conversation_id": conversation, "question": EATING_OUT})
    assert with_peanuts["turn"] == 2
    assert PEANUTS in with_peanuts["ptkb_used"]
    assert "peanut" in cited_text(with_peanuts)

    await call(session, "remove_ptkb", {"conversation_id": conversation, "statement_id": statements[1]["id"]})
    await call(session, "add_ptkb", {"conversation_id": conversation, "text": SHELLFISH})
    with_shellfish = await call(session, "ask", {"conversation_id": conversation, "question": EATING_OUT})
    assert with_shellfish["turn"] == 3
    assert SHELLFISH in with_shellfish["ptkb_used"]
    assert PEANUTS not in with_shellfish["ptkb_used"]
    assert "shellfish" in cited_text(with_shellfish)
    assert with_shellfish["answer"] != with_peanuts["answer"]

    # The conversation is a resource.
    resources = (await session.list_resources()).resources
    uris = [str(r.uri) for r in resources]
    assert f"convrag://conversations/{conversation}" in uris
    read = await session.read_resource(f"convrag://conversations/{conversation}")
    stored = json.loads(read.contents[0].text)
    assert [t["utterance"] for t in stored["turns"]][1:] == [EATING_OUT, EATING_OUT]

    # A bad argument is a tool error the model can read.
    bad = await session.call_tool("ask", {"question": "no collection given"})
    assert bad.is_error
    assert "collection" in bad.content[0].text


def test_mcp_over_stdio(token):
    async def main():
        async with stdio_session(token) as session:
            await exercise(session)

    anyio.run(main)


def test_mcp_over_http(token):
    async def main():
        async with http_session(token) as session:
            await exercise(session)

    anyio.run(main)


def test_a_refused_token_says_bearer_in_www_authenticate():
    """MCP clients start their authorization flow from the 401's WWW-Authenticate header."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    status, headers, _ = raw("POST", "/mcp", body=body)
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer")
    status, headers, _ = raw("POST", "/mcp", {"Authorization": "Bearer not-a-token"}, body)
    assert status == 401
    assert 'error="invalid_token"' in headers["www-authenticate"]
