"""convrag as a chat model for LangChain (`langchain-openai`'s ChatOpenAI, over
/v1/chat/completions). LangChain drops the completion's annotations and its `convrag` field, so
the sources are asked for as text (`"convrag": {"sources": "text"}` through `extra_body`) and the
conversation is checked through convrag's own API."""

import re

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from conftest import COLLECTION, TIMEOUT, URL, conversation_turns, use_up_turn_rate

QUESTION = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"
SOURCES = re.compile(r"\n\nSources:\n\[1\] ")


def chat_model(key, **kwargs):
    return ChatOpenAI(
        model=COLLECTION, base_url=URL + "/v1", api_key=key, timeout=TIMEOUT, max_retries=0,
        extra_body={"convrag": {"sources": "text"}}, **kwargs,
    )


def test_an_answer_and_a_follow_up_keep_the_conversation(token):
    llm = chat_model(token)
    first = llm.invoke([HumanMessage(QUESTION)])
    assert isinstance(first, AIMessage)
    assert re.search(r"\[1\]", first.content), first.content
    assert SOURCES.search(first.content), f"no Sources block in {first.content!r}"
    assert first.response_metadata["finish_reason"] == "stop"
    second = llm.invoke([HumanMessage(QUESTION), first, HumanMessage(FOLLOW_UP)])
    assert SOURCES.search(second.content), second.content
    # One conversation of two turns: the follow-up continued the first answer's conversation.
    assert conversation_turns(token) == [[QUESTION, FOLLOW_UP]]


def test_streaming_sends_the_answer_in_chunks(token):
    chunks = list(chat_model(token).stream([HumanMessage(QUESTION)]))
    assert len(chunks) >= 2, chunks
    content = "".join(c.content for c in chunks)
    assert re.search(r"\[1\]", content), content
    assert SOURCES.search(content), content
    assert conversation_turns(token) == [[QUESTION]]


def test_a_refused_streamed_turn_raises_the_rate_limit_error(token):
    use_up_turn_rate(token)
    received = []
    with pytest.raises(openai.RateLimitError) as raised:
        for chunk in chat_model(token).stream([HumanMessage(QUESTION)]):
            received.append(chunk)
    assert received == [], "refused before any stream byte"
    error = raised.value
    assert error.status_code == 429
    assert error.code == "rate_limited"
    assert int(error.response.headers["retry-after"]) > 0
    assert len(conversation_turns(token)) == 1, "the refused turn stored nothing"


def test_a_bad_key_raises_a_readable_authentication_error(token):
    with pytest.raises(openai.AuthenticationError) as raised:
        chat_model("not-a-convrag-token").invoke([HumanMessage("hello")])
    assert raised.value.status_code == 401
    assert "unknown token" in str(raised.value), str(raised.value)
