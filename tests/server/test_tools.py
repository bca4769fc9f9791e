"""tools and tool_choice on the real server through the openai client: forced calls always match the schema."""

import json

import httpx
import jsonschema
import openai
import pytest

pytestmark = pytest.mark.slow
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather in a city", "parameters": WEATHER},
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Time in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=900)


def test_a_named_tool_choice_returns_its_call_with_valid_arguments(client):
    reply = client.chat.completions.create(
        model="smollm2", messages=ASK, tools=TOOLS, tool_choice=NAMED, max_tokens=60, temperature=0.8, seed=1
    )
    call = reply.choices[0].message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("chatcmpl-tool-")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)
    assert reply.choices[0].finish_reason == "stop"  # vLLM 0.33: a forced named call keeps "stop"


def test_tool_choice_required_calls_a_tool_with_arguments_matching_its_schema(client):
    reply = client.chat.completions.create(
        model="smollm2",
        messages=ASK,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=60,
        temperature=0.8,
        seed=2,
        parallel_tool_calls=False,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    schema = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}[call.function.name]
    jsonschema.validate(json.loads(call.function.arguments), schema)


def test_a_streamed_named_call_sends_the_name_first_then_the_arguments(client):
    stream = client.chat.completions.create(
        model="smollm2", messages=ASK, tools=TOOLS, tool_choice=NAMED, max_tokens=60, temperature=0.0, stream=True
    )
    deltas = [call for chunk in stream if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    assert deltas[0].function.name == "get_weather" and deltas[0].id and deltas[0].index == 0
    arguments = "".join(delta.function.arguments or "" for delta in deltas)
    jsonschema.validate(json.loads(arguments), WEATHER)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"tool_choice": "required"}, "When using `tool_choice`, `tools` must be set."),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "book_flight"}}},
            "Tool 'book_flight' has not been passed in `tools`.",
        ),
        ({"tools": []}, "`tools` must not be an empty array."),
    ],
)
def test_inconsistent_tools_are_refused_with_vllms_message(kvtool_server, body, message):
    reply = httpx.post(f"{kvtool_server}/v1/chat/completions", json={"messages": ASK, "max_tokens": 2, **body})
    assert reply.status_code == 400 and reply.json()["error"]["message"].startswith(message)
