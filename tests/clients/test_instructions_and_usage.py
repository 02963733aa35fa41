"""A chat app's system message and token accounting, through the official `openai` Python client,
with the real test LLM answering (scripts/client-tests.sh starts the server with it).

System messages become the conversation's instructions (stored, readable and settable through
the conversations API) and reach the LLM's prompt; the completion's `usage` is the LLM's own
count; the client's sampling parameters reach the LLM. The LLM call a turn made is kept with the
turn (`diagnostics.llm.request`, the request as sent) and replayed here against the same LLM
server: the server's own answer and token counts must be exactly the turn's.
"""

import os

import openai

from conftest import COLLECTION, TIMEOUT, URL, api

LLM_MODEL = "smollm2-135m-instruct"
QUESTION = "What is a quick vegetarian dinner?"


def client(key):
    return openai.OpenAI(base_url=URL + "/v1", api_key=key, timeout=TIMEOUT, max_retries=0)


def llm_server():
    """The LLM server convrag answers with (the same one)."""
    url = os.environ.get("CONVRAG_CLIENTS_LLM_URL")
    assert url, "CONVRAG_CLIENTS_LLM_URL is not set: run through scripts/client-tests.sh with CONVRAG_TEST_LLM_URL"
    return openai.OpenAI(base_url=url, api_key="none", timeout=TIMEOUT, max_retries=0)


def conversation(token, conversation_id):
    status, body = api("GET", f"/v1/conversations/{conversation_id}", token)
    assert status == 200, body
    return body["conversation"]


def stored_turn(token, convrag):
    status, body = api(
        "GET", f"/v1/conversations/{convrag['conversation_id']}/turns?all_versions=true", token
    )
    assert status == 200, body
    (turn,) = [t for t in body["turns"] if t["id"] == convrag["turn_id"]]
    return turn


def test_system_messages_become_the_conversations_instructions(token):
    oai = client(token)
    first = oai.chat.completions.create(
        model=COLLECTION,
        max_tokens=30,
        messages=[
            {"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": QUESTION},
        ],
    )
    conversation_id = first.model_extra["convrag"]["conversation_id"]
    assert conversation(token, conversation_id)["instructions"] == "Answer in one short sentence."

    # A follow-up whose system messages changed (a developer message counts as one) updates them.
    history = [
        {"role": "system", "content": "Answer for a child."},
        {"role": "developer", "content": "Keep it short."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Is it cheap?"},
    ]
    second = oai.chat.completions.create(model=COLLECTION, max_tokens=30, messages=history)
    assert second.model_extra["convrag"]["conversation_id"] == conversation_id
    assert second.model_extra["convrag"]["turn"] == 2
    assert conversation(token, conversation_id)["instructions"] == "Answer for a child.\n\nKeep it short."

    # Without system messages the conversation keeps its instructions.
    third = oai.chat.completions.create(
        model=COLLECTION,
        max_tokens=30,
        messages=[m for m in history if m["role"] not in ("system", "developer")]
        + [{"role": "assistant", "content": second.choices[0].message.content},
           {"role": "user", "content": "How long does it take?"}],
    )
    assert third.model_extra["convrag"]["turn"] == 3
    assert conversation(token, conversation_id)["instructions"] == "Answer for a child.\n\nKeep it short."

    # Too long a system message is refused, naming it, and stores nothing.
    try:
        oai.chat.completions.create(
            model=COLLECTION,
            messages=[{"role": "system", "content": "x" * 4001}, {"role": "user", "content": "hello"}],
        )
        raise AssertionError("a 4001-character system message was accepted")
    except openai.BadRequestError as e:
        assert e.param == "messages[0].content", e.body
    status, body = api("GET", "/v1/conversations", token)
    assert [c["id"] for c in body["conversations"]] == [conversation_id]

    # The conversations API reads and sets them too.
    status, body = api("PATCH", f"/v1/conversations/{conversation_id}", token,
                       {"instructions": "Answer in French."})
    assert status == 200 and body["conversation"]["instructions"] == "Answer in French.", body
    status, body = api("PATCH", f"/v1/conversations/{conversation_id}", token, {"instructions": "y" * 4001})
    assert status == 400 and body["error"]["field"] == "instructions", body
    status, body = api("PATCH", f"/v1/conversations/{conversation_id}", token, {"instructions": None})
    assert status == 200 and body["conversation"]["instructions"] is None, body
    status, body = api("POST", "/v1/conversations", token,
                       {"title": "t", "collection": COLLECTION, "instructions": "Be brief."})
    assert status == 201 and body["conversation"]["instructions"] == "Be brief.", body


def replay(turn, **sampling):
    """The turn's LLM request sent again to the LLM server, with `sampling` for its parameters."""
    request = turn["diagnostics"]["llm"]["request"]
    return llm_server().chat.completions.create(
        model=LLM_MODEL, messages=request["messages"], seed=request["seed"], **sampling
    )


def check_llm_turn(token, convrag, usage, instructions, sampling):
    """The turn was answered by the LLM from a prompt holding `instructions`, sent with the
    client's `sampling`, and `usage` is what the LLM server counts for that request."""
    assert convrag["usage_counted_by"] == "llm", convrag
    turn = stored_turn(token, convrag)
    assert turn["generator"] == f"llm:{LLM_MODEL}", turn["generator"]
    call = turn["diagnostics"]["llm"]
    request = call["request"]
    system = request["messages"][0]
    assert system["role"] == "system" and system["content"].endswith("\n" + instructions), system
    assert instructions not in request["messages"][1]["content"]
    for name, value in sampling.items():
        assert request[name] == value, (name, request)
    assert (call["prompt_tokens"], call["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)

    # Exactly what the LLM server answers and counts for the recorded request.
    direct = replay(turn, **sampling)
    assert direct.choices[0].message.content.strip() == call["raw_output"].strip()
    assert (direct.usage.prompt_tokens, direct.usage.completion_tokens) == (
        usage.prompt_tokens, usage.completion_tokens)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    return turn, direct


def test_instructions_and_sampling_reach_the_llm_and_usage_is_its_own(token):
    oai = client(token)
    instructions = "Mention the cooking time."
    sampling = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 60, "stop": ["\n\n"]}
    messages = [{"role": "system", "content": instructions}, {"role": "user", "content": QUESTION}]

    completion = oai.chat.completions.create(model=COLLECTION, messages=messages, **sampling)
    turn, direct = check_llm_turn(
        token, completion.model_extra["convrag"], completion.usage, instructions, sampling)
    # The parameters matter for this request: the LLM's defaults answer it otherwise.
    default = replay(turn, temperature=0, max_tokens=60)
    assert default.choices[0].message.content != direct.choices[0].message.content

    # Streamed (the same history again: a new version of the turn), with include_usage.
    chunks = list(oai.chat.completions.create(
        model=COLLECTION, messages=messages, stream=True, stream_options={"include_usage": True},
        **sampling))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    (convrag,) = [c.model_extra["convrag"] for c in chunks if (c.model_extra or {}).get("convrag")]
    assert convrag["turn"] == 1 and convrag["turn_id"] != completion.model_extra["convrag"]["turn_id"]
    check_llm_turn(token, convrag, last.usage, instructions, sampling)
