"""convrag as a model for litellm (its `openai/` provider with `api_base`)."""

import os

# litellm fetches its model price map from the web at import unless told to use its copy; this
# machine reaches only package registries.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import litellm  # noqa: E402
import pytest  # noqa: E402

from conftest import (  # noqa: E402
    BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT, URL, check_rate_limited,
    exhaust_turns, single_conversation_with,
)

# litellm's own pydantic models warn on import; nothing about the server.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
# Its "Give Feedback" banner on every raised error.
litellm.suppress_debug_info = True


def completion(key, messages, **kwargs):
    # max_retries=0: the OpenAI client under litellm would otherwise wait out Retry-After.
    return litellm.completion(model=f"openai/{COLLECTION}", api_base=URL + "/v1", api_key=key,
                              messages=messages, timeout=TIMEOUT, max_retries=0, **kwargs)


def test_a_rate_limited_stream_raises_rate_limit_error(token):
    exhaust_turns(token)
    with pytest.raises(litellm.RateLimitError) as raised:
        for _ in completion(token, [{"role": "user", "content": FIRST}], stream=True):
            pass
    assert raised.value.status_code == 429
    check_rate_limited(str(raised.value))


def test_the_history_continues_one_conversation(token):
    history = [{"role": "user", "content": FIRST}]
    first = completion(token, history)
    answer = first.choices[0].message.content
    assert "[1]" in answer
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW_UP}]
    chunks = list(completion(token, history, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    single_conversation_with(token, [FIRST, FOLLOW_UP])


def test_a_bad_token_is_an_authentication_error_with_the_reason():
    with pytest.raises(litellm.AuthenticationError) as raised:
        completion(BAD_TOKEN, [{"role": "user", "content": FIRST}])
    assert raised.value.status_code == 401
    assert BAD_TOKEN_REASON in str(raised.value)
