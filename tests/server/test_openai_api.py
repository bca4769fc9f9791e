"""The real `kvtool serve` (SmolLM2) through the official openai client: the OpenAI-compatible API."""

import asyncio

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
MAX_MODEL_LEN = 512  # tests/conftest.py KVTOOL_SERVER_ARGS
GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def count_tokens(base_url: str, **body) -> int:
    return httpx.post(f"{base_url}/tokenize", json=body).json()["count"]


def test_models_lists_the_served_model_with_its_context_length(kvtool_server):
    card = httpx.get(f"{kvtool_server}/v1/models").json()["data"][0]
    assert card["id"] == card["root"] == "smollm2"
    assert card["object"] == "model" and card["max_model_len"] == MAX_MODEL_LEN


def test_chat_completion_uses_the_chat_template_and_reports_usage(client, model, kvtool_server):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    reply = client.chat.completions.create(model=model, messages=messages, max_tokens=12, **GREEDY)
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens == count_tokens(kvtool_server, messages=messages)
    assert 0 < reply.usage.completion_tokens <= 12
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_completion_without_max_tokens_stops_at_vllms_default_of_16(client, model):
    reply = client.completions.create(model=model, prompt="Once upon a time", extra_body={"ignore_eos": True})
    assert reply.usage.completion_tokens == 16
    assert reply.choices[0].finish_reason == "length"


def test_streamed_completion_equals_the_whole_one_and_ends_with_usage(client, model):
    kwargs = dict(model=model, prompt="The three primary colours are", max_tokens=10, **GREEDY)
    whole = client.completions.create(**kwargs)
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason


def test_streamed_chat_starts_with_the_role_and_carries_usage(client, model):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count to five."}],
        max_completion_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage.completion_tokens == 6 and chunks[-1].usage.prompt_tokens > 0


def test_max_completion_tokens_wins_over_max_tokens(client, model):
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Tell me a story."}],
        max_tokens=20,
        max_completion_tokens=3,
        extra_body={"ignore_eos": True},
    )
    assert reply.usage.completion_tokens == 3 and reply.choices[0].finish_reason == "length"


def test_a_stop_string_ends_the_text_before_it(client, model):
    kwargs = dict(model=model, prompt="1, 2, 3, 4, 5, 6,", max_tokens=12, **GREEDY)
    free = client.completions.create(**kwargs).choices[0].text
    stop = free.strip()[2:5]
    assert stop and stop in free
    stopped = client.completions.create(stop=[stop], **kwargs).choices[0]
    assert stopped.text == free[: free.index(stop)]
    assert stopped.finish_reason == "stop" and stopped.model_extra["stop_reason"] == stop


def test_n_2_returns_two_choices_counted_in_usage(client, model):
    reply = client.completions.create(
        model=model, prompt="A colour:", max_tokens=5, n=2, seed=7, temperature=1.0, extra_body={"ignore_eos": True}
    )
    assert sorted(c.index for c in reply.choices) == [0, 1]
    assert reply.usage.completion_tokens == 10


def test_32_simultaneous_streams_all_complete(kvtool_server, model):
    async def one(client: openai.AsyncOpenAI, i: int) -> int:
        stream = await client.completions.create(
            model=model,
            prompt=f"Request {i} says",
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        chunks = [chunk async for chunk in stream]
        return chunks[-1].usage.completion_tokens

    async def all_of_them() -> list[int]:
        async with openai.AsyncOpenAI(
            base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=300
        ) as c:
            return await asyncio.gather(*(one(c, i) for i in range(32)))

    assert asyncio.run(all_of_them()) == [6] * 32


def test_request_id_header_is_echoed_and_unknown_model_is_404(kvtool_server):
    reply = httpx.post(
        f"{kvtool_server}/v1/completions", headers={"x-request-id": "trace-42"}, json={"prompt": "Hi", "max_tokens": 1}
    )
    assert reply.headers["x-request-id"] == "trace-42" and reply.json()["id"] == "cmpl-trace-42"
    missing = httpx.post(f"{kvtool_server}/v1/completions", json={"model": "gpt-4", "prompt": "Hi"})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "The model `gpt-4` does not exist. Valid aliases: smollm2."


def test_malformed_body_is_a_400_naming_the_field(kvtool_server):
    reply = httpx.post(
        f"{kvtool_server}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"},
    )
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "body.max_tokens" and "'loc': 'body.max_tokens'" in error["message"]
    missing = httpx.post(f"{kvtool_server}/v1/completions", json={"max_tokens": 3})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "prompt"
