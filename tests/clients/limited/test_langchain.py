"""convrag as a model for LangChain's `ChatOpenAI` (langchain-openai), and its embedding model
for `OpenAIEmbeddings`."""

import math

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from conftest import (
    BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT, URL, check_rate_limited,
    exhaust_turns, single_conversation_with,
)

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384


def chat(key, **kwargs):
    # No retries: a retried 429 would wait out Retry-After instead of raising.
    return ChatOpenAI(model=COLLECTION, base_url=URL + "/v1", api_key=key, timeout=TIMEOUT,
                      max_retries=0, **kwargs)


def test_a_rate_limited_stream_raises_rate_limit_error(token):
    exhaust_turns(token)
    with pytest.raises(openai.RateLimitError) as raised:
        for _ in chat(token, streaming=True).stream(FIRST):
            pass
    assert raised.value.status_code == 429
    check_rate_limited(str(raised.value))


def test_the_history_continues_one_conversation(token):
    llm = chat(token)
    first = llm.invoke([HumanMessage(FIRST)])
    assert "[1]" in first.content
    # The follow-up streamed: LangChain resends the whole history, the server matches it.
    chunks = list(llm.stream([HumanMessage(FIRST), first, HumanMessage(FOLLOW_UP)]))
    assert "".join(c.content for c in chunks).strip()
    single_conversation_with(token, [FIRST, FOLLOW_UP])


def test_a_bad_token_is_an_authentication_error_with_the_reason():
    with pytest.raises(openai.AuthenticationError) as raised:
        chat(BAD_TOKEN).invoke(FIRST)
    assert raised.value.status_code == 401
    assert BAD_TOKEN_REASON in str(raised.value)


def test_embeddings_have_the_model_dimension_and_are_deterministic(token):
    # check_embedding_ctx_length=False sends the texts, not tiktoken ids (the server refuses
    # token ids, and tiktoken would download its encodings).
    embeddings = OpenAIEmbeddings(model=EMBEDDING_MODEL, base_url=URL + "/v1", api_key=token,
                                  check_embedding_ctx_length=False, max_retries=0)
    texts = [FIRST, "Lentils are rich in protein.", FIRST]
    vectors = embeddings.embed_documents(texts)
    assert [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert vectors[0] == vectors[2]
    assert vectors[0] != vectors[1]
    assert embeddings.embed_query(FIRST) == vectors[0]
    # The bi-encoder's vectors are normalized.
    assert math.isclose(math.fsum(x * x for x in vectors[0]), 1.0, rel_tol=1e-3)
