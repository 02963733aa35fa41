"""convrag as a model for the official `openai` Python client."""

import re

import openai
import pytest

from conftest import COLLECTION, TIMEOUT, URL, api

MARKER = re.compile(r"\[(\d+)\]")


def client(key):
    return openai.OpenAI(base_url=URL + "/v1", api_key=key, timeout=TIMEOUT, max_retries=0)


def check_cited(content, convrag):
    """The answer cites with [n] markers, each naming a returned passage, and every returned
    passage is cited."""
    numbers = {int(n) for n in MARKER.findall(content)}
    assert numbers, f"no [n] markers in {content!r}"
    passages = {p["n"]: p for p in convrag["passages"]}
    assert numbers == set(passages), (numbers, sorted(passages))
    for p in passages.values():
        assert p["passage_id"] and p["text"]


def test_models_are_the_collections(token):
    ids = [m.id for m in client(token).models.list()]
    assert COLLECTION in ids


def test_chat_completion_answers_with_citations(token):
    completion = client(token).chat.completions.create(
        model=COLLECTION,
        messages=[{"role": "user", "content": "What is a quick vegetarian dinner?"}],
    )
    message = completion.choices[0].message
    assert message.role == "assistant"
    assert completion.choices[0].finish_reason == "stop"
    convrag = completion.model_extra["convrag"]
    check_cited(message.content, convrag)
    assert convrag["turn"] == 1
    # OpenAI-style annotations point at the markers.
    assert message.annotations, "url_citation annotations"
    for a in message.annotations:
        assert a.type == "url_citation"
        assert MARKER.fullmatch(message.content[a.url_citation.start_index:a.url_citation.end_index])
        assert a.url_citation.url.startswith("https://example.org/")


def test_streaming_sends_the_answer_in_chunks(token):
    stream = client(token).chat.completions.create(
        model=COLLECTION,
        messages=[{"role": "user", "content": "What is a quick vegetarian dinner?"}],
        stream=True,
    )
    chunks = list(stream)
    assert len(chunks) >= 3, "role, content, final chunk"
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    convrag = chunks[-1].model_extra["convrag"]
    assert convrag["content"] == content
    check_cited(content, convrag)


def test_a_follow_up_is_turn_2_of_the_same_conversation(token):
    oai = client(token)
    first_question = "What is a quick vegetarian dinner?"
    follow_up = "How much protein does it have?"
    first = oai.chat.completions.create(
        model=COLLECTION, messages=[{"role": "user", "content": first_question}]
    )
    conversation = first.model_extra["convrag"]["conversation_id"]
    history = [
        {"role": "user", "content": first_question},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": follow_up},
    ]
    second = oai.chat.completions.create(model=COLLECTION, messages=history)
    convrag = second.model_extra["convrag"]
    assert convrag["conversation_id"] == conversation
    assert convrag["turn"] == 2
    check_cited(second.choices[0].message.content, convrag)
    # Sending the same history again does not store the turn twice.
    again = oai.chat.completions.create(model=COLLECTION, messages=history)
    assert again.model_extra["convrag"]["turn_id"] == convrag["turn_id"]
    status, body = api("GET", f"/v1/conversations/{conversation}/turns", token)
    assert status == 200
    assert [t["utterance"] for t in body["turns"]] == [first_question, follow_up]


def test_a_bad_key_is_401_in_openai_shape(token):
    with pytest.raises(openai.AuthenticationError) as raised:
        client("not-a-convrag-token").chat.completions.create(
            model=COLLECTION, messages=[{"role": "user", "content": "hello"}]
        )
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"
    assert raised.value.type == "invalid_request_error"


def test_an_unknown_model_is_404(token):
    with pytest.raises(openai.NotFoundError) as raised:
        client(token).chat.completions.create(
            model="no-such-collection", messages=[{"role": "user", "content": "hello"}]
        )
    assert raised.value.status_code == 404
    assert raised.value.code == "model_not_found"
    assert raised.value.param == "model"
