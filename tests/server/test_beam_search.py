"""use_beam_search on the real server, run as vLLM 0.33's serving layer runs it: one engine request per beam and
step, n beams, the best first; refused only where vLLM refuses it."""

import time

import httpx
import openai
import pytest
from greedy_paths import assert_same_greedy_tokens
from prometheus_client.parser import text_string_to_metric_families

from kvtool.engine.sizing import messages

pytestmark = pytest.mark.slow
BEAM = {"use_beam_search": True}


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=300)


def metric(base_url: str, name: str, **labels: str) -> float:
    families = text_string_to_metric_families(httpx.get(f"{base_url}/metrics").text)
    return sum(s.value for f in families for s in f.samples if s.name == name and labels.items() <= s.labels.items())


@pytest.mark.parametrize("prompts", [["Hello, my name is"] * 2, [[0, 0, 0, 0, 0]] * 2])
def test_n_beams_per_prompt_differ_and_the_same_prompt_gets_the_same_beams(client, prompts):
    batch = client.completions.create(
        model="smollm2", prompt=prompts, n=2, max_tokens=5, temperature=0.0, extra_body=BEAM
    )
    texts = [choice.text for choice in batch.choices]
    assert len(texts) == 4 and texts[0] != texts[1] and texts[:2] == texts[2:]


def test_one_beam_without_eos_is_greedy_decoding(fp32_server):
    client = openai.OpenAI(base_url=f"{fp32_server}/v1", api_key="unused", max_retries=0, timeout=300)
    kwargs = dict(model="smollm2", prompt="The history of the river", max_tokens=6, temperature=0.0, logprobs=2)
    greedy = client.completions.create(**kwargs, extra_body={"ignore_eos": True}).choices[0]
    beam = client.completions.create(**kwargs, extra_body={**BEAM, "ignore_eos": True}).choices[0]
    # each beam step is a prefill of the prompt and the beam so far, where greedy decoding takes decode steps
    assert_same_greedy_tokens(beam.logprobs.tokens, greedy.logprobs.tokens, greedy.logprobs.top_logprobs)
    assert beam.finish_reason == "length"


def test_beams_come_best_first_with_their_logprobs(client):
    batch = client.completions.create(
        model="smollm2",
        prompt="My favourite colour is",
        n=3,
        max_tokens=4,
        logprobs=1,
        extra_body={**BEAM, "ignore_eos": True},
    )
    sums = [sum(choice.logprobs.token_logprobs) for choice in batch.choices]
    assert sums == sorted(sums, reverse=True) and len(set(c.text for c in batch.choices)) == 3
    assert all(len(choice.logprobs.tokens) == 4 for choice in batch.choices)
    assert all(len(top) <= 2 for choice in batch.choices for top in choice.logprobs.top_logprobs)


def test_every_step_of_every_beam_is_an_engine_request(client, kvtool_server):
    before = metric(kvtool_server, "vllm:request_success_total")
    client.completions.create(
        model="smollm2", prompt="Once upon a time", n=2, max_tokens=3, extra_body={**BEAM, "ignore_eos": True}
    )
    assert metric(kvtool_server, "vllm:request_success_total") - before == 1 + 2 + 2  # one beam, then two, then two


def test_chat_streams_a_beam_search_as_one_chunk_per_choice(client):
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Name a fruit."}],
        n=2,
        max_tokens=6,
        stream=True,
        extra_body=BEAM,
    )
    content, finished = {0: "", 1: ""}, {}
    for chunk in stream:
        for choice in chunk.choices:
            content[choice.index] += choice.delta.content or ""
            finished[choice.index] = choice.finish_reason or finished.get(choice.index)
    assert content[0] and content[1] and content[0] != content[1] and set(finished) == {0, 1}


@pytest.mark.parametrize(
    "body, param, message",
    [
        ({"stream": True}, None, messages.STREAMED_BEAM_SEARCH),
        (
            {"echo": True, "logprobs": 1},
            "echo",
            messages.with_parameter(messages.ECHO_LOGPROBS_WITH_BEAM_SEARCH, "echo"),
        ),
        ({"allowed_token_ids": [1, 2]}, "allowed_token_ids", messages.ALLOWED_TOKEN_IDS_WITH_BEAM_SEARCH),
    ],
)
def test_what_beam_search_cannot_do_is_refused(kvtool_server, body, param, message):
    reply = httpx.post(f"{kvtool_server}/v1/completions", json={"prompt": "Hi", "max_tokens": 2, **BEAM, **body})
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == message and reply.json()["error"]["param"] == param


def test_a_client_leaving_a_beam_search_aborts_its_engine_requests(kvtool_server):
    body = {"prompt": "Write a long story.", "n": 4, "max_tokens": 400, "ignore_eos": True, **BEAM}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{kvtool_server}/v1/completions", json=body, timeout=3.0)
    deadline = time.monotonic() + 30
    while metric(kvtool_server, "vllm:num_requests_running") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(kvtool_server, "vllm:num_requests_running") == 0
    assert metric(kvtool_server, "vllm:num_requests_waiting") == 0
