"""truncate_prompt_tokens and truncation_side on the real server: the prompt is cut before it runs, as vLLM 0.33."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
MAX_MODEL_LEN = 512  # tests/conftest.py KVTOOL_SERVER_ARGS
IDS = [504, 3575, 282, 4649, 314, 7042, 30, 378, 4626, 282, 260]  # "The capital of France is Paris. The river of the"


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


def complete(client, prompt, **extra):
    return client.completions.create(model="smollm2", prompt=prompt, max_tokens=4, temperature=0, extra_body=extra)


@pytest.mark.parametrize("side, kept", [("right", IDS[:5]), ("left", IDS[-5:])])
def test_the_side_says_which_tokens_the_model_sees(client, side, kept):
    cut = complete(client, IDS, truncate_prompt_tokens=5, truncation_side=side)
    assert cut.usage.prompt_tokens == 5
    assert cut.choices[0].text == complete(client, kept).choices[0].text


def test_without_a_side_the_tokenizer_keeps_the_start_of_a_text(client, kvtool_server):
    text = "The capital of France is Paris, and the capital of Italy is"
    cut = complete(client, text, truncate_prompt_tokens=6)
    first_six = httpx.post(f"{kvtool_server}/tokenize", json={"prompt": text}).json()["tokens"][:6]
    assert cut.usage.prompt_tokens == 6 and cut.choices[0].text == complete(client, first_six).choices[0].text


def test_minus_one_keeps_all_but_one_token_of_the_context_and_chat_is_cut_too(client):
    long_prompt = list(range(1000, 1000 + 2 * MAX_MODEL_LEN))
    reply = complete(client, long_prompt, truncate_prompt_tokens=-1, truncation_side="left")
    assert reply.usage.prompt_tokens == MAX_MODEL_LEN - 1 and reply.usage.completion_tokens == 1
    chat = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Tell me about rivers. " * 10}],
        max_tokens=2,
        extra_body={"truncate_prompt_tokens": 7, "truncation_side": "left"},
    )
    assert chat.usage.prompt_tokens == 7


def test_more_than_the_context_is_refused_with_vllms_words(kvtool_server):
    body = {"prompt": "Hi", "max_tokens": 2, "truncate_prompt_tokens": MAX_MODEL_LEN + 1}
    error = httpx.post(f"{kvtool_server}/v1/completions", json=body).json()["error"]
    assert error["param"] == "truncate_prompt_tokens" and error["message"] == (
        f"truncate_prompt_tokens={MAX_MODEL_LEN + 1} cannot be greater than max_model_len = {MAX_MODEL_LEN}. Please "
        f"request a smaller truncation size. (parameter=truncate_prompt_tokens, value={MAX_MODEL_LEN + 1})"
    )
    below = httpx.post(f"{kvtool_server}/v1/completions", json={**body, "truncate_prompt_tokens": -2}).json()["error"]
    assert below["param"] == "body.truncate_prompt_tokens" and "'type': 'greater_than_equal'" in below["message"]
