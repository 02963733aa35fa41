"""convrag as a model for the official `openai` Python client's Responses API
(`client.responses`, POST /v1/responses): a string or items as input, `previous_response_id`
continuing the conversation, typed stream events, and retrieval by id."""

import re

import openai
import pytest

from conftest import COLLECTION, TIMEOUT, URL, conversation_turns, use_up_turn_rate

QUESTION = "What is a quick vegetarian dinner?"
FOLLOW_UP = "How much protein does it have?"
MARKER = re.compile(r"\[(\d+)\]")


def client(key):
    return openai.OpenAI(base_url=URL + "/v1", api_key=key, timeout=TIMEOUT, max_retries=0)


def output_text_part(response):
    """The one output_text part of the response's one assistant message."""
    messages = [item for item in response.output if item.type == "message"]
    assert len(messages) == 1, response.output
    assert messages[0].role == "assistant"
    parts = [part for part in messages[0].content if part.type == "output_text"]
    assert len(parts) == 1, messages[0].content
    return parts[0]


def check_annotations(part):
    """Each citation annotation points at a marker of the text (url_citation) or names the cited
    passage's file (file_citation)."""
    assert MARKER.search(part.text), part.text
    assert part.annotations, "citation annotations"
    for a in part.annotations:
        assert a.type in ("url_citation", "file_citation"), a
        if a.type == "url_citation":
            assert MARKER.fullmatch(part.text[a.start_index:a.end_index]), a
            assert a.url.startswith("http"), a
        else:
            assert a.file_id and a.filename is not None and 0 <= a.index <= len(part.text), a


def test_a_response_and_a_follow_up_by_previous_response_id(token):
    oai = client(token)
    first = oai.responses.create(model=COLLECTION, input=QUESTION)
    assert first.object == "response" and first.status == "completed"
    assert first.output_text.strip()
    check_annotations(output_text_part(first))
    second = oai.responses.create(model=COLLECTION, input=FOLLOW_UP, previous_response_id=first.id)
    assert second.id != first.id
    assert second.previous_response_id == first.id
    assert second.output_text.strip()
    # The follow-up is turn 2 of the first response's conversation.
    assert conversation_turns(token) == [[QUESTION, FOLLOW_UP]]
    again = oai.responses.retrieve(first.id)
    assert again.id == first.id and again.output_text == first.output_text


def test_items_as_input_with_instructions(token):
    response = client(token).responses.create(
        model=COLLECTION,
        instructions="Answer in one short paragraph.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}],
    )
    assert response.instructions == "Answer in one short paragraph."
    check_annotations(output_text_part(response))
    assert conversation_turns(token) == [[QUESTION]]


def test_streaming_sends_typed_events(token):
    events = list(client(token).responses.create(model=COLLECTION, input=QUESTION, stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created", types
    assert types[-1] == "response.completed", types
    for expected in ("response.output_item.added", "response.content_part.added",
                     "response.output_text.delta", "response.output_text.done",
                     "response.content_part.done", "response.output_item.done"):
        assert expected in types, (expected, types)
    order = ["response.created", "response.output_item.added", "response.content_part.added",
             "response.output_text.delta", "response.output_text.done",
             "response.content_part.done", "response.output_item.done", "response.completed"]
    firsts = [types.index(t) for t in order]
    assert firsts == sorted(firsts), types
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = next(e for e in events if e.type == "response.output_text.done")
    assert done.text == text
    completed = events[-1].response
    assert completed.status == "completed" and completed.output_text == text
    check_annotations(output_text_part(completed))
    if "response.output_text.annotation.added" in types:
        added = [e.annotation for e in events if e.type == "response.output_text.annotation.added"]
        assert len(added) == len(output_text_part(completed).annotations)
    # Sequence numbers count the events.
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_a_refused_streamed_response_raises_the_rate_limit_error(token):
    use_up_turn_rate(token)
    with pytest.raises(openai.RateLimitError) as raised:
        for _ in client(token).responses.create(model=COLLECTION, input=QUESTION, stream=True):
            pass
    assert raised.value.status_code == 429
    assert raised.value.code == "rate_limited"
    assert int(raised.value.response.headers["retry-after"]) > 0
    assert len(conversation_turns(token)) == 1, "the refused turn stored nothing"


def test_a_bad_key_and_an_unknown_response_id(token):
    with pytest.raises(openai.AuthenticationError) as raised:
        client("not-a-convrag-token").responses.create(model=COLLECTION, input="hello")
    assert raised.value.code == "invalid_api_key"
    assert "unknown token" in str(raised.value)
    unknown = "resp_" + "0" * 32  # well formed, no such response
    with pytest.raises(openai.NotFoundError):
        client(token).responses.retrieve(unknown)
    with pytest.raises((openai.NotFoundError, openai.BadRequestError)) as raised:
        client(token).responses.create(model=COLLECTION, input=FOLLOW_UP, previous_response_id=unknown)
    assert raised.value.param == "previous_response_id"
    assert conversation_turns(token) == [], "nothing stored for a refused request"
