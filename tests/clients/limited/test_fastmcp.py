"""convrag's /mcp (streamable HTTP, bearer token) for the fastmcp client."""

import anyio
import pytest
from fastmcp import Client
from fastmcp.exceptions import McpError, ToolError

from conftest import (
    BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT, URL, check_rate_limited,
    exhaust_turns, single_conversation_with,
)


def client(token):
    # A string auth is sent as the bearer token.
    return Client(URL + "/mcp", auth=token, timeout=TIMEOUT)


def test_a_rate_limited_ask_raises_tool_error(token):
    exhaust_turns(token)

    async def main():
        async with client(token) as mcp:
            # The refused turn is the tool's error result (isError), which fastmcp raises.
            with pytest.raises(ToolError) as raised:
                await mcp.call_tool("ask", {"collection": COLLECTION, "question": FIRST})
            return raised.value

    error = anyio.run(main)
    assert "rate_limited" in str(error)
    check_rate_limited(str(error))


def test_ask_with_the_conversation_id_continues_it(token):
    async def main():
        async with client(token) as mcp:
            first = await mcp.call_tool("ask", {"collection": COLLECTION, "question": FIRST})
            conversation = first.structured_content["conversation_id"]
            second = await mcp.call_tool("ask", {"conversation_id": conversation, "question": FOLLOW_UP})
            assert second.structured_content["turn"] == 2
            return conversation

    conversation = anyio.run(main)
    assert single_conversation_with(token, [FIRST, FOLLOW_UP]) == conversation


def test_a_bad_token_is_refused_with_the_reason():
    async def main():
        async with client(BAD_TOKEN) as mcp:
            await mcp.list_tools()

    # The server's JSON-RPC error (-32001, its reason) as fastmcp raises it.
    with pytest.raises(McpError) as raised:
        anyio.run(main)
    assert raised.value.error.code == -32001
    assert raised.value.error.message == BAD_TOKEN_REASON
