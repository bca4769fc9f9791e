"""Structured outputs on the real server through the openai client: the grammar holds at any temperature."""

import json
import re

import httpx
import jsonschema
import openai
import pytest

pytestmark = pytest.mark.slow
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a person as JSON."}]


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=900)


def test_json_schema_holds_over_20_samples_at_temperature_0_8(client):
    schema_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    reply = client.chat.completions.create(
        model="smollm2", messages=ASK, n=20, temperature=0.8, seed=3, max_tokens=100, response_format=schema_format
    )
    assert len(reply.choices) == 20
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content), PERSON)
        assert choice.finish_reason == "stop"  # the grammar completed; nothing was cut


def test_json_object_always_parses(client):
    # any object: nothing bounds its size, so an example keeps the greedy reply short and max_tokens leaves room
    reply = client.completions.create(
        model="smollm2",
        prompt='A dog, as JSON: {"name": "Rex", "age": 3}\nA cat, as JSON:',
        temperature=0.0,
        max_tokens=200,
        extra_body={"response_format": {"type": "json_object"}},
    )
    assert reply.choices[0].finish_reason == "stop" and isinstance(json.loads(reply.choices[0].text), dict)


def test_a_streamed_json_schema_reply_parses_once_joined(client):
    schema_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    stream = client.chat.completions.create(
        model="smollm2", messages=ASK, max_tokens=100, temperature=0.0, response_format=schema_format, stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    jsonschema.validate(json.loads(text), PERSON)


def test_structured_outputs_choice_regex_and_grammar(client):
    def complete(constraint: dict) -> str:
        return (
            client.completions.create(
                model="smollm2",
                prompt="Is the sky blue? Answer:",
                max_tokens=12,
                temperature=0.8,
                extra_body={"structured_outputs": constraint},
            )
            .choices[0]
            .text
        )

    assert complete({"choice": ["yes", "no", "maybe"]}) in ("yes", "no", "maybe")
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", complete({"regex": r"[0-9]{3}-[0-9]{4}"}))
    assert complete({"grammar": 'root ::= "blue" | "grey"'}) in ("blue", "grey")


@pytest.mark.parametrize(
    "body, param, words",
    [
        ({"response_format": {"type": "yaml"}}, "body.response_format.type", "body.response_format.type"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}},
            None,
            'Failed to transform json schema into a grammar: Unsupported type "strin"',
        ),
        ({"structured_outputs": {"regex": "a("}}, None, "Failed to transform regex into a grammar"),
        (
            {"structured_outputs": {"choice": ["a"], "regex": "b"}},
            None,  # chat's check names no parameter (completions' names structured_outputs)
            "You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice').",
        ),
        (
            {"structured_outputs": {"choice": ["a"], "grammar": "root ::= x"}},
            "structured_outputs",
            "You can only use one kind of structured outputs constraint",
        ),
        ({"priority": 1}, "priority", "'priority' is not supported"),
        ({"logit_bias": {"99999999": 5}}, "logit_bias", "in logit_bias contain out-of-vocab token ids"),
    ],
)
def test_what_cannot_be_honoured_is_a_400_that_says_why(kvtool_server, body, param, words):
    reply = httpx.post(
        f"{kvtool_server}/v1/chat/completions",
        timeout=120,
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, **body},
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert words in error["message"] and error["param"] == param


def test_a_field_sent_at_vllms_default_or_unknown_to_vllm_is_accepted(kvtool_server_handle):
    body = {
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 2,
        "use_beam_search": False,
        "a_field_nobody_knows": 1,
    }
    for _ in range(2):
        reply = httpx.post(f"{kvtool_server_handle.base_url}/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200
    logged = [line for line in open(kvtool_server_handle.log_path) if "a_field_nobody_knows" in line]
    assert len(logged) == 1 and "ignored" in logged[0]
