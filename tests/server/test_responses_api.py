"""POST /v1/responses on the real server through the official openai client: the Responses API as vLLM 0.33 serves it.

Most tests use a server started with VLLM_ENABLE_RESPONSES_API_STORE=1 (responses kept: GET, cancel,
previous_response_id, background); the session's server, started without it, shows what is refused then.
"""

import json
import time

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.slow
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}]
NAMED = {"type": "function", "name": "get_weather"}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def stored_server(kvtool_server_process, tmp_path_factory, smollm2_dir):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VLLM_ENABLE_RESPONSES_API_STORE", "1")
        server = kvtool_server_process(
            tmp_path_factory.mktemp("responses") / "serve.log", "--max-model-len", "1024", "--kv-cache-memory", "64MiB"
        )
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(stored_server):
    return openai.OpenAI(base_url=f"{stored_server}/v1", api_key="unused", max_retries=0, timeout=300)


def prompt_tokens(base_url: str, messages: list[dict], **chat) -> int:
    """The chat template's prompt for these messages, as /v1/chat/completions counts it."""
    body = {"messages": messages, "max_tokens": 1, **chat}
    return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120).json()["usage"]["prompt_tokens"]


def test_a_text_input_is_a_user_turn_of_the_chat_template_and_usage_counts_it(client, stored_server):
    reply = client.responses.create(input="Name a colour.", instructions="Answer in one word.", max_output_tokens=8)
    messages = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Name a colour."}]
    assert reply.object == "response" and reply.id.startswith("resp_") and reply.model == "smollm2"
    assert reply.usage.input_tokens == prompt_tokens(stored_server, messages)
    assert 0 < reply.usage.output_tokens <= 8
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens
    message = reply.output[-1]
    assert message.type == "message" and message.role == "assistant" and reply.output_text == message.content[0].text
    assert reply.instructions == "Answer in one word." and reply.max_output_tokens == 8


def test_max_output_tokens_cuts_the_reply_and_marks_it_incomplete(client):
    reply = client.responses.create(
        input="Tell me a long story about a lighthouse.", max_output_tokens=5, extra_body={"ignore_eos": True}
    )
    assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"
    assert reply.usage.output_tokens == 5 and reply.output[-1].status == "incomplete"


def test_items_in_input_make_the_same_prompt_as_the_chat_messages(client, stored_server):
    items = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}, {"type": "input_text", "text": "there"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": "How are you?"},
    ]
    reply = client.responses.create(input=items, max_output_tokens=2)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi\nthere"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "How are you?"},
    ]
    assert reply.usage.input_tokens == prompt_tokens(stored_server, messages)


def test_an_unfinished_assistant_message_at_the_end_is_continued(client, stored_server):
    partial = {
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": "The sky is"}],
    }
    reply = client.responses.create(
        input=[{"role": "user", "content": "Describe the sky."}, partial], max_output_tokens=2
    )
    messages = [{"role": "user", "content": "Describe the sky."}, {"role": "assistant", "content": "The sky is"}]
    continued = prompt_tokens(stored_server, messages, add_generation_prompt=False, continue_final_message=True)
    assert reply.usage.input_tokens == continued != prompt_tokens(stored_server, messages)


def test_a_streamed_response_pairs_its_events_and_ends_as_the_stored_one(client):
    events = list(client.responses.create(input="Say hello in one sentence.", stream=True, max_output_tokens=12))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] in (
        "response.completed",
        "response.incomplete",
    )
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    final = events[-1].response
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert final.output[0].id == events[2].item.id
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()


def test_output_logprobs_come_with_the_requested_alternatives_whole_and_streamed(client):
    kwargs = dict(
        input="Hello!", include=["message.output_text.logprobs"], top_logprobs=3, max_output_tokens=4, temperature=0.0
    )
    reply = client.responses.create(**kwargs)
    logprobs = reply.output[-1].content[0].logprobs
    assert len(logprobs) == reply.usage.output_tokens and all(len(lp.top_logprobs) == 3 for lp in logprobs)
    assert logprobs[0].logprob == max(top.logprob for top in logprobs[0].top_logprobs)  # greedy: the best one
    deltas = [e for e in client.responses.create(stream=True, **kwargs) if e.type == "response.output_text.delta"]
    assert sum(len(e.logprobs) for e in deltas) == len(logprobs) and all(e.logprobs[0].top_logprobs for e in deltas)
    assert reply.top_logprobs == 3


def test_a_named_function_is_called_with_arguments_matching_its_schema_then_its_output_is_answered(
    client, stored_server
):
    reply = client.responses.create(input=ASK, tools=TOOLS, tool_choice=NAMED, max_output_tokens=60, temperature=0.0)
    call = reply.output[-1]
    assert call.type == "function_call" and call.name == "get_weather" and call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    follow_up = [*ASK, call, {"type": "function_call_output", "call_id": call.call_id, "output": "21 degrees"}]
    answer = client.responses.create(input=follow_up, tools=TOOLS, tool_choice="none", max_output_tokens=10)
    assert answer.output[-1].type == "message" and answer.output_text
    function = {"name": "get_weather", "arguments": call.arguments}
    history = [
        *ASK,
        {"role": "assistant", "tool_calls": [{"id": call.call_id, "type": "function", "function": function}]},
        {"role": "tool", "content": "21 degrees", "tool_call_id": call.call_id},
    ]
    chat_tools = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]
    assert answer.usage.input_tokens == prompt_tokens(stored_server, history, tools=chat_tools, tool_choice="none")


def test_tool_choice_required_calls_a_tool_and_streams_its_arguments(client):
    events = list(
        client.responses.create(
            input=ASK, tools=TOOLS, tool_choice="required", stream=True, max_output_tokens=80, temperature=0.0
        )
    )
    added = next(e.item for e in events if e.type == "response.output_item.added")
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e.item for e in events if e.type == "response.output_item.done")
    assert added.type == done.type == "function_call" and added.call_id == done.call_id and done.arguments == arguments
    jsonschema.validate(json.loads(arguments), WEATHER)
    assert not [e for e in events if e.type == "response.output_text.delta"]


def test_a_namespace_function_is_shown_flattened_and_called_by_its_own_name(client):
    namespace = {"type": "namespace", "name": "weather", "description": "Weather tools", "tools": [TOOLS[0]]}
    reply = client.responses.create(input=ASK, tools=[namespace], tool_choice=NAMED, max_output_tokens=60)
    call = reply.output[-1]
    assert (call.name, call.namespace) == ("get_weather", "weather")
    assert reply.tool_choice.name == "weather__get_weather"


def test_text_format_json_schema_constrains_the_reply(client):
    class Event(BaseModel):
        name: str
        day: str

    reply = client.responses.parse(
        input="Alice and Bob go to a science fair on Friday.", text_format=Event, max_output_tokens=60
    )
    assert isinstance(reply.output_parsed, Event)
    jsonschema.validate(json.loads(reply.output_text), Event.model_json_schema())


def test_previous_response_id_continues_the_stored_conversation(client, stored_server):
    first = client.responses.create(input="My name is John.", instructions="Be brief.", max_output_tokens=6)
    second = client.responses.create(input="What is my name?", previous_response_id=first.id, max_output_tokens=2)
    history = [
        {"role": "user", "content": "My name is John."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"},
    ]
    assert second.usage.input_tokens == prompt_tokens(stored_server, history)  # instructions do not carry over
    assert second.previous_response_id == first.id


def test_a_response_not_stored_is_not_found(client):
    reply = client.responses.create(input="Hi", store=False, max_output_tokens=2)
    with pytest.raises(openai.NotFoundError, match=f"Response with id '{reply.id}' not found."):
        client.responses.retrieve(reply.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(input="Hi", previous_response_id=reply.id, max_output_tokens=2)


def test_a_background_response_is_queued_then_completed(client):
    reply = client.responses.create(input="Hello!", background=True, max_output_tokens=4)
    assert reply.status == "queued" and reply.output == []
    for _ in range(120):
        reply = client.responses.retrieve(reply.id)
        if reply.status != "queued":
            break
        time.sleep(0.5)
    assert reply.status in ("completed", "incomplete") and reply.output_text
    with pytest.raises(openai.BadRequestError, match="Cannot cancel a synchronous response."):
        client.responses.cancel(reply.id)


def test_a_cancelled_background_response_stays_cancelled_and_frees_the_engine(client, stored_server):
    reply = client.responses.create(
        input="Write a long story.", background=True, max_output_tokens=900, extra_body={"ignore_eos": True}
    )
    time.sleep(1.0)
    assert client.responses.cancel(reply.id).status == "cancelled"
    time.sleep(1.0)
    assert client.responses.retrieve(reply.id).status == "cancelled"
    metrics = httpx.get(f"{stored_server}/metrics").text
    assert "vllm:num_requests_running{" in metrics and _gauge(metrics, "vllm:num_requests_running") == 0


def _gauge(metrics: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(name + "{"))


def test_a_background_stream_can_be_read_again_from_any_event(client):
    events = list(client.responses.create(input="Hello!", background=True, stream=True, max_output_tokens=4))
    response_id = events[0].response.id
    again = list(client.responses.retrieve(response_id, stream=True, starting_after=1))
    assert [e.sequence_number for e in again] == [e.sequence_number for e in events[2:]]
    assert again[-1].response.model_dump() == events[-1].response.model_dump()


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"background": True, "store": False}, 400, "background can only be used when `store` is true"),
        ({"prompt": {"id": "pmpt_1"}}, 400, "prompt template is not supported"),
        ({"tool_choice": "required"}, 400, "Tool choice 'required' must be specified with 'tools' parameter."),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "name": "f"}}, 400, "Tool choice 'function' not found"),
        ({"tools": [{"type": "web_search"}]}, 400, "Tool type 'web_search' is not supported"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, 400, "text only"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, 400, "Unsupported input item type: item_reference"),
        ({"cache_salt": "salt"}, 400, "The request field 'cache_salt' is not supported"),
        ({"text": {"format": {"type": "json_object"}}, "structured_outputs": {"json_object": True}}, 400, "Cannot"),
        ({"previous_response_id": "resp_unknown"}, 404, "Response with id 'resp_unknown' not found."),
        ({"model": "gpt-5"}, 404, "The model `gpt-5` does not exist."),
    ],
)
def test_requests_it_cannot_serve_are_refused_with_vllms_words(stored_server, body, status, message):
    reply = httpx.post(f"{stored_server}/v1/responses", json={"input": "Hi", "max_output_tokens": 2, **body})
    assert reply.status_code == status and message in reply.json()["error"]["message"]


def test_without_the_store_nothing_is_kept_and_background_is_refused(kvtool_server):
    client = openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)
    reply = client.responses.create(input="Hi", max_output_tokens=2)  # store defaults to true: ignored
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(reply.id)
    with pytest.raises(openai.BadRequestError, match="VLLM_ENABLE_RESPONSES_API_STORE=1"):
        client.responses.create(input="Hi", background=True)
