"""convrag as a model for LlamaIndex's `OpenAILike` (llama-index-llms-openai-like), and its
embedding model for `OpenAILikeEmbedding`. Run in a venv of its own: LlamaIndex needs openai<3."""

import math

import openai
import pytest
from llama_index.core.llms import ChatMessage
from llama_index.embeddings.openai_like import OpenAILikeEmbedding
from llama_index.llms.openai_like import OpenAILike

from conftest import (
    BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT, URL, check_rate_limited,
    exhaust_turns, single_conversation_with,
)

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384


def llm(key):
    # No retries: a retried 429 would wait out Retry-After instead of raising.
    return OpenAILike(model=COLLECTION, api_base=URL + "/v1", api_key=key, is_chat_model=True,
                      timeout=TIMEOUT, max_retries=0)


def user(text):
    return ChatMessage(role="user", content=text)


def test_a_rate_limited_stream_raises_rate_limit_error(token):
    exhaust_turns(token)
    with pytest.raises(openai.RateLimitError) as raised:
        for _ in llm(token).stream_chat([user(FIRST)]):
            pass
    assert raised.value.status_code == 429
    check_rate_limited(str(raised.value))


def test_the_history_continues_one_conversation(token):
    model = llm(token)
    first = model.chat([user(FIRST)])
    assert "[1]" in first.message.content
    last = None
    for last in model.stream_chat([user(FIRST), first.message, user(FOLLOW_UP)]):
        pass
    assert last is not None and last.message.content.strip()
    single_conversation_with(token, [FIRST, FOLLOW_UP])


def test_a_bad_token_is_an_authentication_error_with_the_reason():
    with pytest.raises(openai.AuthenticationError) as raised:
        llm(BAD_TOKEN).chat([user(FIRST)])
    assert raised.value.status_code == 401
    assert BAD_TOKEN_REASON in str(raised.value)


def test_embeddings_have_the_model_dimension_and_are_deterministic(token):
    embeddings = OpenAILikeEmbedding(model_name=EMBEDDING_MODEL, api_base=URL + "/v1",
                                     api_key=token, max_retries=0)
    texts = [FIRST, "Lentils are rich in protein.", FIRST]
    vectors = embeddings.get_text_embedding_batch(texts)
    assert [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert vectors[0] == vectors[2]
    assert vectors[0] != vectors[1]
    assert embeddings.get_query_embedding(FIRST) == vectors[0]
    assert math.isclose(math.fsum(x * x for x in vectors[0]), 1.0, rel_tol=1e-3)
