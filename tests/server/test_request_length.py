"""Over-long requests on the real server (max_model_len 512, the default clamp): vLLM 0.33's status and wording."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
MAX_MODEL_LEN = 512  # tests/conftest.py KVTOOL_SERVER_ARGS


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=900)


def refused(call, **kwargs) -> dict:
    with pytest.raises(openai.BadRequestError) as caught:
        call(model="smollm2", **kwargs)
    assert caught.value.status_code == 400
    return caught.value.response.json()["error"]


def test_a_text_prompt_over_the_context_counts_at_least_one_past_the_limit(client):
    error = refused(client.completions.create, prompt="hello " * 600, max_tokens=5)
    assert error["param"] == "input_tokens" and error["type"] == "BadRequestError"
    assert error["message"] == (
        "This model's maximum context length is 512 tokens. However, your prompt contains at least 513 input tokens, "
        "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. "
        "(parameter=input_tokens, value=513)"
    )


def test_a_token_prompt_over_the_context_counts_every_token(client):
    error = refused(client.completions.create, prompt=[28] * 600, max_tokens=5)
    assert error["message"] == (
        "This model's maximum context length is 512 tokens. However, your prompt contains 600 input tokens, "
        "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. "
        "(parameter=input_tokens, value=600)"
    )


def test_a_prompt_filling_the_context_leaves_max_tokens_at_zero(client):
    error = refused(client.completions.create, prompt=[28] * MAX_MODEL_LEN, max_tokens=5)
    assert error["param"] == "max_tokens"
    assert error["message"] == "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"


def test_max_tokens_above_the_context_names_the_field_sent(client):
    error = refused(client.completions.create, prompt="Hi", max_tokens=600)
    assert error["param"] == "max_tokens"
    assert error["message"] == (
        "max_tokens=600 cannot be greater than max_model_len=512. Please request fewer "
        "output tokens. (parameter=max_tokens, value=600)"
    )
    error = refused(
        client.chat.completions.create, messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=1000
    )
    assert error["param"] == "max_completion_tokens"
    assert error["message"] == (
        "max_completion_tokens=1000 cannot be greater than max_model_len=512. Please request "
        "fewer output tokens. (parameter=max_completion_tokens, value=1000)"
    )


def test_too_many_characters_are_refused_before_tokenizing(client, smollm2_dir):
    from transformers import AutoTokenizer

    max_chars = max(len(t) for t in AutoTokenizer.from_pretrained(str(smollm2_dir)).get_vocab())
    prompt = "a" * (MAX_MODEL_LEN * max_chars + 1)
    error = refused(client.completions.create, prompt=prompt, max_tokens=5)
    assert error["param"] == "input_text"
    assert error["message"] == (
        f"This model's maximum context length is 512 tokens. However, your prompt contains {len(prompt)} characters "
        f"(more than {MAX_MODEL_LEN * max_chars} characters, which is the upper bound for 512 input tokens). Please "
        f"reduce the length of the input prompt. (parameter=input_text, value={len(prompt)})"
    )


def test_the_16_token_default_near_the_limit_runs_with_the_room_left(client):
    reply = client.completions.create(
        model="smollm2", prompt=[28] * (MAX_MODEL_LEN - 5), extra_body={"ignore_eos": True}
    )
    assert reply.usage.completion_tokens == 5 and reply.choices[0].finish_reason == "length"


def test_prompt_plus_max_tokens_over_the_context_is_clamped_and_said_in_a_header(kvtool_server):
    body = {"prompt": [28] * (MAX_MODEL_LEN - 4), "max_tokens": 100, "ignore_eos": True}
    reply = httpx.post(f"{kvtool_server}/v1/completions", json=body, timeout=120)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
    assert reply.headers["x-kvtool-max-tokens-clamped"] == "100->4"
