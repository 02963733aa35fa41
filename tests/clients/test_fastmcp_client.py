"""convrag as a tool server for FastMCP's `Client` over streamable HTTP (/mcp), signed in with a
bearer token (`auth=<token>`)."""

import anyio
import pytest
from fastmcp import Client
from fastmcp.exceptions import MCPError, ToolError

from conftest import COLLECTION, TIMEOUT, URL, conversation_turns, use_up_turn_rate

QUESTION = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"


def mcp_client(token):
    return Client(URL + "/mcp", auth=token, timeout=TIMEOUT)


def run(main):
    return anyio.run(main)


def test_tools_are_listed_and_ask_keeps_the_conversation(token):
    async def main():
        async with mcp_client(token) as client:
            names = {t.name for t in await client.list_tools()}
            assert {"search", "ask", "list_ptkb", "add_ptkb", "remove_ptkb"} <= names, names
            first = (await client.call_tool("ask", {"collection": COLLECTION, "question": QUESTION})).structured_content
            assert first["turn"] == 1
            assert first["passages"]
            for p in first["passages"]:
                assert f"[{p['n']}]" in first["answer"]
            second = (await client.call_tool(
                "ask", {"conversation_id": first["conversation_id"], "question": FOLLOW_UP})).structured_content
            assert second["conversation_id"] == first["conversation_id"]
            assert second["turn"] == 2
            # A tool's error is a ToolError whose text names the argument.
            with pytest.raises(ToolError) as raised:
                await client.call_tool("ask", {"question": "no collection given"})
            assert "collection" in str(raised.value), str(raised.value)

    run(main)
    assert conversation_turns(token) == [[QUESTION, FOLLOW_UP]]


def test_a_refused_turn_is_a_tool_error_naming_the_rate_limit(token):
    use_up_turn_rate(token)

    async def main():
        async with mcp_client(token) as client:
            with pytest.raises(ToolError) as raised:
                await client.call_tool("ask", {"collection": COLLECTION, "question": QUESTION})
            return str(raised.value)

    message = run(main)
    # e.g. "rate_limited: turns: at most 60 turns per minute; retry in 1 s"
    assert "rate_limited" in message and "per minute" in message, message
    assert len(conversation_turns(token)) == 1, "the refused turn stored nothing"


def test_a_bad_token_raises_an_error_with_the_servers_message():
    """The 401's JSON-RPC error body reaches the caller as the SDK's MCPError."""
    async def main():
        async with mcp_client("not-a-convrag-token") as client:
            await client.list_tools()

    with pytest.raises(MCPError) as raised:
        run(main)
    assert raised.value.code == -32001
    assert raised.value.data == {"code": "invalid_token"}
    assert "unknown token" in str(raised.value), str(raised.value)
