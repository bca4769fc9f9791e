"""logit_bias, allowed_token_ids, bad_words, echo on chat and /tokenize on the real server, as vLLM defines them."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=900)


def first_token(client, **extra) -> int:
    reply = client.completions.create(
        model="smollm2", prompt=PROMPT, max_tokens=1, temperature=0.0, logprobs=0, extra_body=extra or None
    )
    return reply.choices[0].logprobs.tokens[0], reply


def tokenize(base_url: str, **body) -> dict:
    return httpx.post(f"{base_url}/tokenize", json=body).json()


def test_logit_bias_minus_100_on_the_greedy_first_token_changes_it(client, kvtool_server):
    token, _ = first_token(client)
    token_id = tokenize(kvtool_server, prompt=token, add_special_tokens=False)["tokens"][0]
    biased, _ = first_token(client, logit_bias={str(token_id): -100})
    assert biased != token


def test_allowed_token_ids_are_the_only_ones_drawn(client, kvtool_server):
    allowed = tokenize(kvtool_server, prompt=" one two three", add_special_tokens=False)["tokens"]
    reply = client.completions.create(
        model="smollm2",
        prompt=PROMPT,
        max_tokens=6,
        temperature=1.0,
        seed=2,
        extra_body={"allowed_token_ids": allowed, "ignore_eos": True},
    )
    generated = tokenize(kvtool_server, prompt=reply.choices[0].text, add_special_tokens=False)["tokens"]
    assert set(generated) <= set(allowed)


def test_bad_words_never_appear(client):
    kwargs = dict(model="smollm2", prompt=PROMPT, max_tokens=6, temperature=0.0)
    free = client.completions.create(**kwargs).choices[0].text
    word = free.split()[0]
    banned = client.completions.create(**kwargs, extra_body={"bad_words": [word]}).choices[0].text
    assert word not in banned.split()


def test_echo_on_chat_prefixes_the_assistant_message_being_continued(client):
    messages = [{"role": "user", "content": "Say a colour."}, {"role": "assistant", "content": "My colour is"}]
    reply = client.chat.completions.create(
        model="smollm2",
        messages=messages,
        max_tokens=3,
        temperature=0.0,
        extra_body={"echo": True, "continue_final_message": True, "add_generation_prompt": False},
    )
    assert reply.choices[0].message.content.startswith("My colour is")


def test_tokenize_round_trips_and_returns_token_strings(kvtool_server):
    text = "kvtool counts tokens"
    tokens = tokenize(kvtool_server, prompt=text, return_token_strs=True)
    assert tokens["count"] == len(tokens["tokens"]) == len(tokens["token_strs"])
    assert httpx.post(f"{kvtool_server}/detokenize", json={"tokens": tokens["tokens"]}).json()["prompt"] == text
    chat = tokenize(kvtool_server, messages=[{"role": "user", "content": text}])
    assert chat["count"] > tokens["count"]
    bad = httpx.post(f"{kvtool_server}/detokenize", json={"tokens": [10**9]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"
