"""convrag's Responses API for the official `openai` Python client's `client.responses.create`."""

import openai
import pytest

from conftest import (
    BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT, URL, check_rate_limited,
    exhaust_turns, single_conversation_with,
)


def client(key):
    # No retries: a retried 429 would wait out Retry-After instead of raising.
    return openai.OpenAI(base_url=URL + "/v1", api_key=key, timeout=TIMEOUT, max_retries=0)


def test_a_rate_limited_stream_raises_rate_limit_error(token):
    exhaust_turns(token)
    with pytest.raises(openai.RateLimitError) as raised:
        for _ in client(token).responses.create(model=COLLECTION, input=FIRST, stream=True):
            pass
    assert raised.value.status_code == 429
    assert raised.value.code == "rate_limited"
    check_rate_limited(raised.value.message)


def test_previous_response_id_continues_the_conversation(token):
    oai = client(token)
    first = oai.responses.create(model=COLLECTION, input=FIRST)
    assert first.status == "completed" and "[1]" in first.output_text
    # Only the new message, streamed; the earlier turn is named by its response id.
    events = list(oai.responses.create(model=COLLECTION, input=FOLLOW_UP,
                                       previous_response_id=first.id, stream=True))
    done = events[-1]
    assert done.type == "response.completed", [e.type for e in events]
    assert done.response.previous_response_id == first.id
    assert done.response.output_text.strip()
    single_conversation_with(token, [FIRST, FOLLOW_UP])


def test_a_bad_token_is_an_authentication_error_with_the_reason():
    with pytest.raises(openai.AuthenticationError) as raised:
        client(BAD_TOKEN).responses.create(model=COLLECTION, input=FIRST)
    assert raised.value.code == "invalid_api_key"
    assert BAD_TOKEN_REASON in raised.value.message
