"""vLLM's request fields on the real server: logprobs, echo, stop tokens, min_tokens, the 16-token warning."""

import time

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


def test_completion_logprobs_hold_the_sampled_token_and_the_top_candidates(client):
    reply = client.completions.create(
        model="smollm2", prompt="The sun rises in the", max_tokens=4, logprobs=2, temperature=0.0
    )
    logprobs = reply.choices[0].logprobs
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == 4
    assert "".join(logprobs.tokens) == reply.choices[0].text
    for sampled, top in zip(logprobs.token_logprobs, logprobs.top_logprobs):
        assert len(top) >= 2 and sampled == pytest.approx(max(top.values()))  # greedy: the sampled one is the best
    assert logprobs.text_offset == sorted(logprobs.text_offset)


def test_chat_logprobs_list_top_logprobs_per_token(client):
    reply = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=3,
        logprobs=True,
        top_logprobs=3,
        extra_body={"ignore_eos": True},
    )
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens == 3
    assert all(len(token.top_logprobs) == 3 and token.logprob <= 0 for token in content)


def test_echo_puts_the_prompt_before_the_completion(client):
    reply = client.completions.create(model="smollm2", prompt="Roses are red,", max_tokens=3, echo=True)
    assert reply.choices[0].text.startswith("Roses are red,")


def test_stop_token_ids_end_the_output(client, kvtool_server):
    free = client.completions.create(model="smollm2", prompt="A, B, C,", max_tokens=6, temperature=0.0)
    second = httpx.post(f"{kvtool_server}/tokenize", json={"prompt": free.choices[0].text}).json()["tokens"][1]
    stopped = client.completions.create(
        model="smollm2", prompt="A, B, C,", max_tokens=6, temperature=0.0, extra_body={"stop_token_ids": [second]}
    )
    assert stopped.choices[0].finish_reason == "stop" and stopped.choices[0].model_extra["stop_reason"] == second


def test_min_tokens_holds_back_the_end_of_sequence(client):
    kwargs = dict(
        model="smollm2",
        messages=[{"role": "user", "content": "What is 2+2?"}],
        max_tokens=24,
        temperature=0.0,
    )
    short = client.chat.completions.create(**kwargs)
    assert short.choices[0].finish_reason == "stop" and short.usage.completion_tokens < 24
    held = client.chat.completions.create(**kwargs, extra_body={"min_tokens": 24})
    assert held.usage.completion_tokens == 24


def test_tokenize_and_detokenize_round_trip(kvtool_server):
    tokens = httpx.post(f"{kvtool_server}/tokenize", json={"prompt": "kvtool counts tokens"}).json()
    assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 512
    text = httpx.post(f"{kvtool_server}/detokenize", json={"tokens": tokens["tokens"]}).json()["prompt"]
    assert text == "kvtool counts tokens"


def test_stopping_at_the_16_token_default_logs_one_warning_with_the_fix(kvtool_server_handle):
    reply = httpx.post(
        f"{kvtool_server_handle.base_url}/v1/completions",
        headers={"x-request-id": "warn-me"},
        json={"prompt": "Tell me about", "ignore_eos": True},
        timeout=120,
    )
    assert reply.json()["usage"]["completion_tokens"] == 16
    time.sleep(0.5)
    lines = [line for line in open(kvtool_server_handle.log_path) if "cmpl-warn-me" in line]
    assert len(lines) == 1 and lines[0].startswith("WARNING")
    assert "default max_tokens=16" in lines[0] and "set max_tokens in the request" in lines[0]


def test_n_2_streams_interleave_two_choices_that_both_finish(client):
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Pick a number."}],
        n=2,
        max_tokens=4,
        stream=True,
        seed=1,
        extra_body={"ignore_eos": True},
    )
    finished = {c.index: c.finish_reason for chunk in stream for c in chunk.choices if c.finish_reason}
    assert finished == {0: "length", 1: "length"}


def test_continuous_usage_stats_count_up_in_every_chunk(client):
    stream = client.completions.create(
        model="smollm2",
        prompt="Go:",
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        extra_body={"ignore_eos": True},
    )
    counts = [chunk.usage.completion_tokens for chunk in stream]
    assert counts == sorted(counts) and counts[-1] == 4 and len(counts) >= 4


def test_a_request_id_no_header_can_carry_is_answered_not_a_500(kvtool_server):
    body = {"prompt": "Hi", "max_tokens": 2, "request_id": "请求-1"}
    reply = httpx.post(f"{kvtool_server}/v1/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert "请求-1" in reply.json()["id"] and "x-request-id" not in reply.headers
