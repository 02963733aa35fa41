"""convrag as an LLM for LlamaIndex (`llama-index-llms-openai-like`'s OpenAILike, over
/v1/chat/completions). LlamaIndex pins `openai<3`, so scripts/client-tests.sh runs this file in a
venv of its own. LlamaIndex drops the completion's annotations and its `convrag` field, so the
sources are asked for as text (`"convrag": {"sources": "text"}` through `extra_body`) and the
conversation is checked through convrag's own API."""

import re

import openai
import pytest
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.llms.openai_like import OpenAILike

from conftest import COLLECTION, TIMEOUT, URL, conversation_turns, use_up_turn_rate

QUESTION = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"
SOURCES = re.compile(r"\n\nSources:\n\[1\] ")


def llm(key):
    return OpenAILike(
        model=COLLECTION, api_base=URL + "/v1", api_key=key, is_chat_model=True, timeout=TIMEOUT,
        max_retries=0, additional_kwargs={"extra_body": {"convrag": {"sources": "text"}}},
    )


def user(text):
    return ChatMessage(role=MessageRole.USER, content=text)


def test_an_answer_and_a_follow_up_keep_the_conversation(token):
    model = llm(token)
    first = model.chat([user(QUESTION)])
    assert first.message.role == MessageRole.ASSISTANT
    assert SOURCES.search(first.message.content), first.message.content
    second = model.chat([user(QUESTION), first.message, user(FOLLOW_UP)])
    assert SOURCES.search(second.message.content), second.message.content
    assert conversation_turns(token) == [[QUESTION, FOLLOW_UP]]


def test_streaming_sends_the_answer_in_chunks(token):
    chunks = list(llm(token).stream_chat([user(QUESTION)]))
    assert len(chunks) >= 2
    assert re.search(r"\[1\]", chunks[-1].message.content), chunks[-1].message.content
    assert "".join(c.delta or "" for c in chunks) == chunks[-1].message.content
    assert conversation_turns(token) == [[QUESTION]]


def test_a_refused_streamed_turn_raises_the_rate_limit_error(token):
    use_up_turn_rate(token)
    received = []
    with pytest.raises(openai.RateLimitError) as raised:
        for chunk in llm(token).stream_chat([user(QUESTION)]):
            received.append(chunk)
    assert received == [], "refused before any stream byte"
    assert raised.value.status_code == 429
    assert raised.value.code == "rate_limited"
    assert len(conversation_turns(token)) == 1, "the refused turn stored nothing"


def test_a_bad_key_raises_a_readable_authentication_error(token):
    with pytest.raises(openai.AuthenticationError) as raised:
        llm("not-a-convrag-token").chat([user("hello")])
    assert raised.value.status_code == 401
    assert "unknown token" in str(raised.value), str(raised.value)
