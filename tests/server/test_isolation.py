"""No request can hurt another: bad inputs are 4xx at admission, while three long streams run unharmed,
and one keep-alive connection carries on after every refusal."""

import concurrent.futures
import json

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
STREAM_TOKENS = 150

BAD_REQUESTS = [  # (path, body, the field the error must name)
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 2, "seed": 2**64}, "seed"),
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 2, "seed": 2**64 - 1, "n": 2}, "seed"),
    (
        "/v1/completions",
        {"prompt": "Hi", "max_tokens": 4, "min_tokens": 2, "stop_token_ids": [1000000000]},
        "stop_token_ids",
    ),
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 4, "min_tokens": 2, "stop_token_ids": [-1]}, "stop_token_ids"),
    ("/v1/completions", {"prompt": [49152], "max_tokens": 2}, "prompt"),
    ("/detokenize", {"tokens": [-5]}, "tokens"),
    ("/detokenize", {"tokens": [2**70]}, "tokens"),
    ("/detokenize", {"tokens": [49152]}, "tokens"),
    ("/v1/completions", {"prompt": "a\ud800b", "max_tokens": 2}, "prompt"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a\ud800b"}]}, "messages.0.content"),
    ("/tokenize", {"prompt": "a\ud800b"}, "prompt"),
    ("/v1/completions", {"prompt": "Hi", "top_k": -2}, "top_k"),
    ("/v1/completions", {"prompt": "Hi", "temperature": 2.5}, "temperature"),
    ("/v1/completions", {"prompt": "Hi", "logit_bias": {"1000000000": 1.0}}, "logit_bias"),
    ("/v1/completions", {"prompt": "Hi", "stream": "yes"}, "stream"),
    ("/detokenize", {"tokens": [False]}, "tokens.0"),
    ("/tokenize", {"prompt": "Hi", "add_generation_prompt": 0}, "add_generation_prompt"),
]


def post_json(http: httpx.Client, path: str, body: dict) -> httpx.Response:
    """JSON with \\u escapes, so that a lone surrogate travels as the JSON text `"\\ud800"`."""
    return http.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def _stream(base_url: str, prompt: str) -> tuple[int, str | None]:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    stream = client.completions.create(
        model="smollm2",
        prompt=prompt,
        max_tokens=STREAM_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    finish, tokens = None, 0
    for chunk in stream:  # an error event would raise openai.APIError here
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return tokens, finish


def test_bad_requests_are_refused_while_streams_run_and_the_connection_survives(kvtool_server):
    prompts = ["The history of the river", "A recipe for bread", "Notes on the stars"]
    with concurrent.futures.ThreadPoolExecutor(3) as pool, httpx.Client(base_url=kvtool_server, timeout=60) as http:
        streams = [pool.submit(_stream, kvtool_server, p) for p in prompts]
        assert http.get("/v1/models").status_code == 200
        connections = list(http._transport._pool.connections)  # one, kept alive: a closed one would be replaced
        for path, body, field in BAD_REQUESTS:
            reply = post_json(http, path, body)
            assert 400 <= reply.status_code < 500, (path, body, reply.text)
            error = reply.json()["error"]
            # pydantic's errors name the field under `body.` (vLLM's validation handler), the others name it bare
            assert error["type"] in ("BadRequestError", "Bad Request"), (body, error)
            assert error["param"].removeprefix("body.").startswith(field), (body, error)
            assert http.get("/v1/models").status_code == 200
            assert http._transport._pool.connections == connections  # the same keep-alive connection
        assert [s.result() for s in streams] == [(STREAM_TOKENS, "length")] * 3


def test_vllm_wordings_name_the_field(kvtool_server):
    with httpx.Client(base_url=kvtool_server, timeout=60) as http:
        stop = http.post("/v1/completions", json={"prompt": "Hi", "stop_token_ids": [10**9]}).json()["error"]
        assert stop["message"] == (
            "token_id(s) [1000000000] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 49152"
            " (parameter=stop_token_ids, value=[1000000000])"
        )
        assert http.post("/detokenize", json={"tokens": [49152]}).json()["error"]["message"] == (
            "Token id 49152 is out of vocabulary"
        )
        for raw, kind in ((b"", "missing"), (b"null", "model_attributes_type"), (b"[]", "model_attributes_type")):
            reply = http.post("/v1/completions", content=raw, headers={"content-type": "application/json"})
            error = reply.json()["error"]
            assert reply.status_code == 400 and error["type"] == "Bad Request" and error["param"] == "body", raw
            assert error["message"].startswith(f"1 validation error:\n  {{'type': '{kind}', 'loc': 'body'"), raw
        garbled = http.post("/v1/completions", content=b"\xff\xfe", headers={"content-type": "application/json"})
        assert garbled.status_code == 400 and "'type': 'json_invalid'" in garbled.json()["error"]["message"]


def test_405_says_which_methods_are_allowed(kvtool_server):
    reply = httpx.get(f"{kvtool_server}/v1/completions")
    assert reply.status_code == 405 and reply.headers["allow"] == "POST"
    assert reply.json()["error"]["code"] == 405


def test_n_choices_come_from_the_engine_with_distinct_indices(kvtool_server):
    client = openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)
    reply = client.completions.create(
        model="smollm2", prompt=["One", "Two"], n=2, max_tokens=3, seed=7, extra_body={"ignore_eos": True}
    )
    assert sorted(c.index for c in reply.choices) == [0, 1, 2, 3] and reply.usage.completion_tokens == 12
    chunks = client.completions.create(
        model="smollm2", prompt="One", n=3, max_tokens=4, stream=True, extra_body={"ignore_eos": True}
    )
    finishes = [c.choices[0].index for c in chunks if c.choices and c.choices[0].finish_reason]
    assert sorted(finishes) == [0, 1, 2]  # each choice finishes exactly once
