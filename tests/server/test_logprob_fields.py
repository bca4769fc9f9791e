"""vLLM's logprob and token-id fields on the real server: echo scoring, prompt_logprobs, return_token_ids,
return_tokens_as_token_ids, logprob_token_ids, and the fields every answer carries (null when unset)."""

import math

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
GREEDY = {"temperature": 0.0}
PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


def tokenize(base_url: str, text: str) -> list[int]:
    return httpx.post(f"{base_url}/tokenize", json={"prompt": text}).json()["tokens"]


def post(base_url: str, route: str, body: dict) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/{route}", json=body, timeout=120)


def test_unset_fields_are_present_and_null(client, kvtool_server):
    choice = client.completions.create(model="smollm2", prompt="Hi", max_tokens=2).choices[0]
    assert (choice.token_ids, choice.prompt_logprobs, choice.prompt_token_ids) == (None, None, None)
    chat = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert (chat.prompt_logprobs, chat.prompt_token_ids, chat.choices[0].token_ids) == (None, None, None)
    assert chat.usage.prompt_tokens_details is None  # the server does not report it without its flag
    message = post(
        kvtool_server, "chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    )
    assert message.json()["choices"][0]["message"].keys() == {
        "role",
        "content",
        "refusal",
        "annotations",
        "audio",
        "function_call",
        "reasoning",
    }  # tool_calls left out when there are none, as vLLM


def test_echo_with_logprobs_scores_the_prompt_then_the_output(client, kvtool_server):
    reply = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=3, echo=True, logprobs=1, **GREEDY)
    choice, prompt_ids = reply.choices[0], tokenize(kvtool_server, PROMPT)
    logprobs = choice.logprobs
    assert choice.text.startswith(PROMPT) and len(logprobs.tokens) == len(prompt_ids) + 3
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    assert "".join(logprobs.tokens) == choice.text
    assert all(1 <= len(top) <= 2 for top in logprobs.top_logprobs[1:])
    scored = [next(iter(entry.values()))["logprob"] for entry in choice.prompt_logprobs[1:]]
    assert logprobs.token_logprobs[1 : len(prompt_ids)] == pytest.approx(scored)


def test_echo_with_max_tokens_0_is_lm_evaluation_harness_log_likelihood(client, kvtool_server):
    """lm-evaluation-harness's loglikelihood request: the prompt alone, each token's logprob given what precedes."""
    reply = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=0, echo=True, logprobs=0)
    choice, prompt_ids = reply.choices[0], tokenize(kvtool_server, PROMPT)
    assert choice.text == PROMPT and len(choice.logprobs.tokens) == len(prompt_ids)
    assert all(lp is not None and lp <= 0 for lp in choice.logprobs.token_logprobs[1:])
    assert [len(top) for top in choice.logprobs.top_logprobs[1:]] == [1] * (len(prompt_ids) - 1)
    assert choice.finish_reason == "length" and reply.usage.completion_tokens == 1  # the token vLLM samples, unshown
    refused = post(kvtool_server, "completions", {"prompt": PROMPT, "max_tokens": 0})
    assert refused.status_code == 400 and refused.json()["error"]["message"] == "max_tokens must be at least 1, got 0."


def test_logprobs_0_gives_the_sampled_token_alone(client):
    reply = client.completions.create(model="smollm2", prompt=[0, 0, 0, 0, 0], max_tokens=4, logprobs=0, **GREEDY)
    logprobs = reply.choices[0].logprobs
    assert [list(top) for top in logprobs.top_logprobs] == [[token] for token in logprobs.tokens]


def test_a_logprob_count_sent_as_a_bool_reads_as_0_or_1_as_in_vllm(kvtool_server):
    body = {"model": "smollm2", "prompt": [0, 0, 0], "max_tokens": 2, **GREEDY}
    as_false = post(kvtool_server, "completions", {**body, "logprobs": False}).json()["choices"][0]["logprobs"]
    as_zero = post(kvtool_server, "completions", {**body, "logprobs": 0}).json()["choices"][0]["logprobs"]
    as_true = post(kvtool_server, "completions", {**body, "logprobs": True}).json()["choices"][0]["logprobs"]
    as_one = post(kvtool_server, "completions", {**body, "logprobs": 1}).json()["choices"][0]["logprobs"]
    assert as_false == as_zero and as_true == as_one and as_false["tokens"] == as_true["tokens"]
    scored = [post(kvtool_server, "completions", {**body, "prompt_logprobs": n}).json() for n in (True, 1)]
    assert scored[0]["choices"][0]["prompt_logprobs"] == scored[1]["choices"][0]["prompt_logprobs"] is not None


def test_prompt_logprobs_on_both_routes(client, kvtool_server):
    reply = client.completions.create(
        model="smollm2", prompt=["Hello there", "My name is"], max_tokens=1, extra_body={"prompt_logprobs": 2}
    )
    for choice, prompt in zip(reply.choices, ["Hello there", "My name is"]):
        ids = tokenize(kvtool_server, prompt)
        assert choice.prompt_logprobs[0] is None and len(choice.prompt_logprobs) == len(ids)
        assert [int(next(iter(entry))) for entry in choice.prompt_logprobs[1:]] == ids[1:]
        assert all(2 <= len(entry) <= 3 for entry in choice.prompt_logprobs[1:])
    chat = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=1,
        extra_body={"prompt_logprobs": 0, "return_token_ids": True},
    )
    assert [int(next(iter(entry))) for entry in chat.prompt_logprobs[1:]] == chat.prompt_token_ids[1:]
    assert all(entry["rank"] >= 1 for e in chat.prompt_logprobs[1:] for entry in e.values())


@pytest.mark.parametrize(
    "route, body, message",
    [
        (
            "completions",
            {"prompt_logprobs": 1, "stream": True},
            "`prompt_logprobs` are not available when `stream=True`.",
        ),
        ("chat/completions", {"prompt_logprobs": -2}, "`prompt_logprobs` must be a positive value or -1."),
        ("chat/completions", {"prompt_logprobs": -1}, "Requested prompt logprobs of 49152"),
        ("chat/completions", {"top_logprobs": 2}, "when using `top_logprobs`, `logprobs` must be set to true."),
        ("completions", {"logprob_token_ids": [5]}, "when using `logprob_token_ids`, `logprobs` must be set."),
        ("completions", {"logprobs": 21}, "Requested sample logprobs of 21, which is greater than max allowed: 20"),
    ],
)
def test_vllms_refusals_of_the_logprob_fields(kvtool_server, route, body, message):
    prompt = {"prompt": "Hi"} if route == "completions" else {"messages": [{"role": "user", "content": "Hi"}]}
    reply = post(kvtool_server, route, {**prompt, "max_tokens": 1, **body})
    assert reply.status_code == 400 and message in reply.json()["error"]["message"]


def test_return_token_ids_whole_and_streamed(client, kvtool_server):
    reply = client.completions.create(
        model="smollm2", prompt=PROMPT, max_tokens=4, extra_body={"return_token_ids": True}, **GREEDY
    )
    choice = reply.choices[0]
    assert choice.prompt_token_ids == tokenize(kvtool_server, PROMPT) and len(choice.token_ids) == 4
    chunks = list(
        client.completions.create(
            model="smollm2", prompt=PROMPT, max_tokens=4, stream=True, extra_body={"return_token_ids": True}, **GREEDY
        )
    )
    assert chunks[0].choices[0].prompt_token_ids == choice.prompt_token_ids
    assert all(c.choices[0].prompt_token_ids is None for c in chunks[1:])
    assert [t for c in chunks for t in c.choices[0].token_ids] == choice.token_ids


def test_chat_token_ids_hold_the_end_of_sequence_the_content_leaves_out(client, kvtool_server):
    kwargs = dict(model="smollm2", messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=40, **GREEDY)
    reply = client.chat.completions.create(**kwargs, extra_body={"return_token_ids": True})
    assert reply.choices[0].finish_reason == "stop"
    text = httpx.post(f"{kvtool_server}/detokenize", json={"tokens": reply.choices[0].token_ids}).json()["prompt"]
    assert text == reply.choices[0].message.content + "<|im_end|>"
    shown = client.chat.completions.create(**kwargs, extra_body={"skip_special_tokens": False})
    assert shown.choices[0].message.content == reply.choices[0].message.content  # the stop token is not detokenized
    chunks = list(client.chat.completions.create(**kwargs, stream=True, extra_body={"return_token_ids": True}))
    assert chunks[0].prompt_token_ids == reply.prompt_token_ids
    assert all("prompt_token_ids" not in chunk.model_dump() for chunk in chunks[1:])
    assert [t for c in chunks[1:] for t in c.choices[0].token_ids] == reply.choices[0].token_ids


def test_return_tokens_as_token_ids_names_every_logprob_token_by_id(client):
    reply = client.completions.create(
        model="smollm2",
        prompt=PROMPT,
        max_tokens=3,
        echo=True,
        logprobs=1,
        extra_body={"return_tokens_as_token_ids": True},
    )
    logprobs = reply.choices[0].logprobs
    assert all(token.startswith("token_id:") for token in logprobs.tokens)
    assert logprobs.tokens[1:] == [next(iter(top)) for top in logprobs.top_logprobs[1:]]


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_logprob_token_ids_give_the_sampled_token_and_exactly_those(kvtool_server, route):
    prompt = {"prompt": "Hello"} if route == "completions" else {"messages": [{"role": "user", "content": "Hello"}]}
    body = {
        **prompt,
        "max_tokens": 1,
        "logprobs": 5 if route == "completions" else True,
        "logprob_token_ids": [100, 5000],
        "allowed_token_ids": [42],
        "return_tokens_as_token_ids": True,
    }
    logprobs = post(kvtool_server, route, body).json()["choices"][0]["logprobs"]
    if route == "completions":
        assert logprobs["tokens"] == ["token_id:42"] and list(logprobs["top_logprobs"][0]) == [
            "token_id:42",
            "token_id:100",
            "token_id:5000",
        ]
    else:
        top = logprobs["content"][0]["top_logprobs"]
        assert [entry["token"] for entry in top] == ["token_id:42", "token_id:100", "token_id:5000"]
        assert all(math.isfinite(entry["logprob"]) for entry in top)


def test_a_masked_token_among_the_top_logprobs_is_minus_9999_not_a_500(kvtool_server):
    body = {
        "messages": [{"role": "user", "content": "Yes or no?"}],
        "max_tokens": 3,
        "logprobs": True,
        "top_logprobs": 20,
        "structured_outputs": {"choice": ["yes", "no"]},
    }
    reply = post(kvtool_server, "chat/completions", body)
    assert reply.status_code == 200, reply.text
    top = reply.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert -9999.0 in [entry["logprob"] for entry in top]


def test_the_role_chunk_counts_no_completion_tokens(client):
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        extra_body={"ignore_eos": True},
    )
    counts = [chunk.usage.completion_tokens for chunk in stream]
    assert counts == [0, 1, 2, 3, 3]


def test_a_streamed_tool_call_carries_every_token_id(client):
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}},
        },
    }
    kwargs = dict(
        model="smollm2",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[tool],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=40,
        extra_body={"return_token_ids": True},
        **GREEDY,
    )
    whole = client.chat.completions.create(**kwargs).choices[0]
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    assert [t for chunk in chunks[1:] for t in chunk.choices[0].token_ids] == whole.token_ids
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
