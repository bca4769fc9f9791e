"""Forced tool calls ("required" and named) as vLLM 0.33 runs them: tools whose parameters use `$defs`, a
response_format beside the forced call, and a call that max_tokens cuts off."""

import json

import httpx
import jsonschema
import openai
import pytest

from kvtool.engine.sizing import messages

pytestmark = pytest.mark.slow
UNIT = {"type": "string", "enum": ["celsius", "fahrenheit"]}
DEFS_TOOL = {  # vLLM's test tool: the parameters refer to their own $defs
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}, "options": {"$ref": "#/$defs/Options"}},
            "required": ["city", "options"],
            "additionalProperties": False,
            "$defs": {
                "Options": {
                    "type": "object",
                    "properties": {"unit": UNIT},
                    "required": ["unit"],
                    "additionalProperties": False,
                }
            },
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Dallas?"}]
NAMED = {"type": "function", "function": {"name": "get_current_weather"}}


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=900)


def with_defs(name: str, unit: dict) -> dict:
    tool = json.loads(json.dumps(DEFS_TOOL))
    tool["function"]["name"] = name
    tool["function"]["parameters"]["$defs"]["Options"]["properties"]["unit"] = unit
    return tool


def test_required_with_defs_calls_the_tool_with_arguments_matching_its_schema(client):
    reply = client.chat.completions.create(
        model="smollm2", messages=ASK, tools=[DEFS_TOOL], tool_choice="required", max_tokens=100, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    for call in choice.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), DEFS_TOOL["function"]["parameters"])


def test_the_same_definition_in_two_tools_is_one_and_a_conflicting_one_is_refused(kvtool_server):
    body = {"messages": ASK, "max_tokens": 40, "tool_choice": "required", "temperature": 0}
    same = httpx.post(
        f"{kvtool_server}/v1/chat/completions", json={**body, "tools": [DEFS_TOOL, with_defs("other", UNIT)]}
    )
    assert same.status_code == 200, same.text
    conflict = httpx.post(
        f"{kvtool_server}/v1/chat/completions",
        json={**body, "tools": [DEFS_TOOL, with_defs("other", {"type": "integer"})]},
    )
    assert conflict.status_code == 400
    error = conflict.json()["error"]
    assert error["param"] == "tools"
    assert error["message"] == messages.with_parameter(messages.TOOL_DEFS_CONFLICT.format(name="Options"), "tools")


def test_the_forced_call_wins_over_response_format(client):
    reply = client.chat.completions.create(
        model="smollm2",
        messages=ASK,
        tools=[DEFS_TOOL],
        tool_choice="required",
        response_format={"type": "json_object"},
        max_tokens=100,
        temperature=0,
    )
    assert reply.choices[0].finish_reason == "tool_calls" and reply.choices[0].message.tool_calls


def test_a_named_tool_beside_a_constraint_is_refused_with_vllms_message(kvtool_server):
    body = {"messages": ASK, "tools": [DEFS_TOOL], "tool_choice": NAMED, "structured_outputs": {"choice": ["a"]}}
    reply = httpx.post(f"{kvtool_server}/v1/chat/completions", json=body)
    assert reply.status_code == 400
    assert reply.json()["error"] == {
        "message": messages.CONSTRAINTS_AND_NAMED_TOOL,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


@pytest.mark.parametrize("tool_choice", ["required", NAMED])
@pytest.mark.parametrize("max_tokens", [1, 5])
def test_a_call_cut_by_max_tokens_is_dropped(client, tool_choice, max_tokens):
    reply = client.chat.completions.create(
        model="smollm2", messages=ASK, tools=[DEFS_TOOL], tool_choice=tool_choice, max_tokens=max_tokens, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.tool_calls is None and choice.message.content == ""
