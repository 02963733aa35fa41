"""convrag as an OpenAI-compatible model for LiteLLM (`litellm.completion` with the `openai/`
provider prefix and `api_base`), the SDK most proxies and agent frameworks route through."""

import os
import re

# LiteLLM fetches its model price map from GitHub when imported unless told to use its own copy.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import litellm  # noqa: E402
import pytest  # noqa: E402

from conftest import COLLECTION, TIMEOUT, URL, conversation_turns, use_up_turn_rate  # noqa: E402

# LiteLLM's pydantic models warn about their own TypedDicts.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

QUESTION = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"


def complete(key, messages, **kwargs):
    return litellm.completion(
        model=f"openai/{COLLECTION}", api_base=URL + "/v1", api_key=key, messages=messages,
        timeout=TIMEOUT, max_retries=0, num_retries=0, **kwargs,
    )


def test_an_answer_and_a_follow_up_keep_the_conversation(token):
    first = complete(token, [{"role": "user", "content": QUESTION}])
    answer = first.choices[0].message.content
    assert re.search(r"\[1\]", answer), answer
    assert first.choices[0].finish_reason == "stop"
    second = complete(token, [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": FOLLOW_UP},
    ])
    assert second.choices[0].message.content.strip()
    assert conversation_turns(token) == [[QUESTION, FOLLOW_UP]]


def test_streaming_sends_the_answer_in_chunks(token):
    stream = complete(token, [{"role": "user", "content": QUESTION}], stream=True)
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert re.search(r"\[1\]", content), content
    assert conversation_turns(token) == [[QUESTION]]


def test_a_refused_streamed_turn_raises_the_rate_limit_error(token):
    use_up_turn_rate(token)
    received = []
    with pytest.raises(litellm.RateLimitError) as raised:
        for chunk in complete(token, [{"role": "user", "content": QUESTION}], stream=True):
            received.append(chunk)
    assert received == [], "refused before any stream byte"
    assert raised.value.status_code == 429
    assert "rate" in str(raised.value).lower(), str(raised.value)
    assert len(conversation_turns(token)) == 1, "the refused turn stored nothing"


def test_a_bad_key_raises_a_readable_authentication_error(token):
    with pytest.raises(litellm.AuthenticationError) as raised:
        complete("not-a-convrag-token", [{"role": "user", "content": "hello"}])
    assert raised.value.status_code == 401
    assert "unknown token" in str(raised.value), str(raised.value)
