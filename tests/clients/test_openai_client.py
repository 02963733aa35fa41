"""convrag as a model for the official `openai` Python client."""

import re

import openai
import pytest

from conftest import COLLECTION, TIMEOUT, URL, api, raw

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
    # A retry of the same history with an Idempotency-Key does not store the turn twice.
    again = oai.chat.completions.create(
        model=COLLECTION, messages=history, extra_headers={"Idempotency-Key": "follow-up-1"}
    )
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


def test_a_history_no_conversation_holds_is_imported(token):
    """An edited or branched history (or one from another app) keeps its context: its earlier
    exchanges become the conversation's first turns, imported, and the question is the next."""
    history = [
        {"role": "user", "content": "What is a quick vegetarian dinner?"},
        {"role": "assistant", "content": "Red lentil dal cooks in twenty minutes."},
        {"role": "user", "content": "How much protein does it have?"},
    ]
    completion = client(token).chat.completions.create(model=COLLECTION, messages=history)
    convrag = completion.model_extra["convrag"]
    assert convrag["turn"] == 2
    status, body = api("GET", f"/v1/conversations/{convrag['conversation_id']}/turns", token)
    assert status == 200
    first, second = body["turns"]
    assert first["utterance"] == history[0]["content"]
    assert first["response_text"] == history[1]["content"]
    assert first["generator"] == "imported"
    assert first["passages"] == []
    assert second["utterance"] == history[2]["content"]
    assert second["generator"] != "imported"


def test_one_message_is_a_new_session_a_key_replays_and_an_answered_history_regenerates(token):
    oai = client(token)
    messages = [{"role": "user", "content": "What is a quick vegetarian dinner?"}]
    first = oai.chat.completions.create(model=COLLECTION, messages=messages)
    again = oai.chat.completions.create(model=COLLECTION, messages=messages)
    a, b = first.model_extra["convrag"], again.model_extra["convrag"]
    # A single user message starts a session of its own, even a question asked before.
    assert b["conversation_id"] != a["conversation_id"] and b["turn"] == 1
    # A retry with the same Idempotency-Key is answered with the turn the first stored.
    keyed = oai.chat.completions.create(
        model=COLLECTION, messages=messages, extra_headers={"Idempotency-Key": "client-retry-1"}
    )
    retried = oai.chat.completions.create(
        model=COLLECTION, messages=messages, extra_headers={"Idempotency-Key": "client-retry-1"}
    )
    k = keyed.model_extra["convrag"]
    assert retried.model_extra["convrag"]["turn_id"] == k["turn_id"], "a keyed retry replays"
    assert retried.choices[0].message.content == keyed.choices[0].message.content
    # The history ending with the answer to its last question asks for it anew: a new version
    # of turn 1 of the newest conversation holding it.
    answered = messages + [{"role": "assistant", "content": keyed.choices[0].message.content}]
    anew = oai.chat.completions.create(model=COLLECTION, messages=answered).model_extra["convrag"]
    assert anew["conversation_id"] == k["conversation_id"] and anew["turn"] == 1
    assert anew["turn_id"] != k["turn_id"]
    status, body = api("GET", f"/v1/conversations/{k['conversation_id']}/turns?all_versions=true", token)
    assert status == 200 and len(body["turns"]) == 2
    status, body = api("GET", "/v1/conversations", token)
    assert status == 200 and len(body["conversations"]) == 3


def test_usage_counts_tokens_and_streams_with_include_usage(token):
    oai = client(token)
    messages = [{"role": "user", "content": "What is a quick vegetarian dinner?"}]
    completion = oai.chat.completions.create(model=COLLECTION, messages=messages)
    usage = completion.usage
    assert usage.prompt_tokens == 7  # What is a quick vegetarian dinner ?
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    chunks = list(oai.chat.completions.create(
        model=COLLECTION, messages=messages, stream=True, stream_options={"include_usage": True}
    ))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.prompt_tokens == 7 and last.usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_one_model_by_id_and_openai_shaped_errors(token):
    oai = client(token)
    model = oai.models.retrieve(COLLECTION)
    assert model.id == COLLECTION and model.object == "model"
    with pytest.raises(openai.NotFoundError) as raised:
        oai.models.retrieve("no-such-collection")
    assert raised.value.code == "model_not_found"
    # Unknown paths and methods under the OpenAI routes answer in OpenAI's shape too.
    with pytest.raises(openai.NotFoundError) as raised:
        oai.get("/models/diet/extra", cast_to=object)
    assert raised.value.body["code"] == "route_not_found"
    with pytest.raises(openai.APIStatusError) as raised:
        oai.delete("/chat/completions", cast_to=object)
    assert raised.value.status_code == 405
    assert raised.value.body["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
          "tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
          "tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice"),
        ({"response_format": {"type": "json_schema",
                              "json_schema": {"name": "x", "schema": {"type": "object"}}}},
         "response_format"),
    ],
)
def test_what_convrag_cannot_do_is_refused_naming_the_parameter(token, extra, param):
    with pytest.raises(openai.BadRequestError) as raised:
        client(token).chat.completions.create(
            model=COLLECTION, messages=[{"role": "user", "content": "hello"}], **extra
        )
    assert raised.value.param == param
    status, body = api("GET", "/v1/conversations", token)
    assert body["conversations"] == [], "nothing stored for a refused request"


def test_tools_with_auto_get_a_plain_answer_and_max_tokens_bounds_it(token):
    completion = client(token).chat.completions.create(
        model=COLLECTION,
        messages=[{"role": "user", "content": "What is a quick vegetarian dinner?"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        tool_choice="auto",
        max_tokens=40,
    )
    message = completion.choices[0].message
    assert not message.tool_calls
    words = MARKER.sub("", message.content).split()
    assert 0 < len(words) <= 40, message.content


def test_the_plain_llm_model_answers_without_retrieval_or_storage(token):
    oai = client(token)
    ids = [m.id for m in oai.models.list()]
    assert "convrag-llm" in ids, "an LLM is configured for the client tests"
    completion = oai.chat.completions.create(
        model="convrag-llm",
        messages=[{"role": "user", "content": "Write a three-word title for a chat about lentils."}],
        max_tokens=16,
        temperature=0,
    )
    assert completion.choices[0].message.content.strip()
    assert "convrag" not in (completion.model_extra or {})
    assert completion.usage.completion_tokens > 0
    status, body = api("GET", "/v1/conversations", token)
    assert body["conversations"] == [], "a housekeeping request stores nothing"


def test_cors_preflight_for_a_configured_origin(token):
    origin = "http://127.0.0.1:9"  # CONVRAG_CORS_ORIGINS of the client-test server
    for path in ("/v1/chat/completions", "/mcp"):
        status, headers, text = raw("OPTIONS", path, {
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert status == 200, (path, status, text)
        assert headers["access-control-allow-origin"] == origin
        assert "POST" in headers["access-control-allow-methods"]
    status, headers, _ = raw("GET", "/v1/models", {"Origin": origin, "Authorization": f"Bearer {token}"})
    assert status == 200 and headers["access-control-allow-origin"] == origin
    status, headers, _ = raw("OPTIONS", "/v1/models", {
        "Origin": "http://elsewhere.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in headers
