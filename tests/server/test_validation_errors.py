"""Invalid bodies answered as vLLM 0.33 answers them: pydantic's own errors through its validation handler, and
the checks it runs on the raw body (stream_options without stream, an empty prompt) as their own 400s."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def http(kvtool_server):
    with httpx.Client(base_url=kvtool_server, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


def error_of(reply: httpx.Response) -> dict:
    assert reply.status_code == 400, reply.text
    return reply.json()["error"]


@pytest.mark.parametrize("seed, kind", [(-(2**63) - 1, "greater_than_equal"), (2**63, "less_than_equal")])
def test_a_seed_beyond_64_bits_is_pydantics_error_as_vllm_words_it(http, seed, kind):
    error = error_of(http.post("/v1/chat/completions", json={**CHAT, "seed": seed}))
    bound, op = (-(2**63), "ge") if kind == "greater_than_equal" else (2**63 - 1, "le")
    words = "greater than or equal to" if op == "ge" else "less than or equal to"
    assert error["message"] == (
        f"1 validation error:\n  {{'type': '{kind}', 'loc': 'body.seed', 'msg': 'Input should be {words} {bound}', "
        f"'input': '{seed}', 'ctx': {{'{op}': {bound}}}}}"
    )
    assert error["type"] == "Bad Request" and error["param"] == "body.seed" and error["code"] == 400


def test_every_route_reports_at_most_ten_errors_with_long_inputs_cut(http):
    bad = {"prompt": "Hi", "temperature": "t" * 300, "n": 0, "top_p": 0, "top_k": -9, "min_p": 5, "seed": "s"}
    bad |= {"presence_penalty": 9, "frequency_penalty": 9, "stream": "no", "logprobs": "x", "echo": 1, "user": 5}
    error = error_of(http.post("/v1/completions", json=bad))
    lines = error["message"].splitlines()
    assert lines[0] == "12 validation errors:" and len(lines) == 12 and lines[-1] == "  ...and 2 more errors"
    assert f"'input': '{'t' * 200}...[truncated]'" in error["message"]
    assert error["param"] == "body.n"  # the first invalid field in the model's order
    tokens = error_of(http.post("/detokenize", json={"tokens": [-1, "x"]}))
    assert tokens["message"].startswith("2 validation errors:\n  {'type': 'greater_than_equal', 'loc': 'body.tokens.0'")


def test_stream_options_need_stream_true(http, client):
    for route, body in (("/v1/completions", {"prompt": "Hi", "max_tokens": 2}), ("/v1/chat/completions", CHAT)):
        error = error_of(http.post(route, json={**body, "stream_options": {"include_usage": True}}))
        assert error == {
            "message": "Stream options can only be defined when `stream=True`. (parameter=stream_options)",
            "type": "BadRequestError",
            "param": "stream_options",
            "code": 400,
        }
        assert http.post(route, json={**body, "stream_options": {}}).status_code == 200  # empty asks for nothing
    stream = client.completions.create(
        model="smollm2", prompt="Hi", max_tokens=2, stream=True, stream_options={"include_usage": True}
    )
    assert [chunk.usage for chunk in stream][-1].completion_tokens >= 1


@pytest.mark.parametrize("prompt", [None, ""])
def test_an_empty_prompt_is_vllms_own_400(client, prompt):
    with pytest.raises(openai.BadRequestError, match="Either prompt or prompt_embeds must be provided and non-empty."):
        client.completions.create(model="smollm2", prompt=prompt, max_tokens=5, extra_body={"prompt_embeds": []})


def test_a_body_without_a_prompt_names_it(http):
    error = error_of(http.post("/v1/completions", json={"max_tokens": 3}))
    assert error["param"] == "prompt" and error["type"] == "BadRequestError"
    assert error["message"] == "Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)"
