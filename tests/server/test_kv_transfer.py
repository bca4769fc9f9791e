"""kv_transfer_params without a KV connector, as vLLM 0.33 serves it: accepted and nothing transferred, while chat
takes the prompt token ids a disaggregated-serving router forwards in it (decode-side token reuse)."""

import httpx
import openai
import pytest
from greedy_paths import assert_same_greedy_tokens

from kvtool.engine.sizing import messages

pytestmark = pytest.mark.slow
ASKED = [{"role": "user", "content": "Hello, how are you today?"}]
OTHER = [{"role": "user", "content": "unrelated decode-side text"}]


@pytest.fixture(scope="module")
def client(kvtool_server):
    return openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)


def chat(client, chat_messages, **extra):
    return client.chat.completions.create(
        model="smollm2", messages=chat_messages, max_tokens=8, temperature=0, extra_body=extra
    )


def test_forwarded_prompt_ids_replace_the_messages(fp32_server):
    # the forwarded prompt hits the prefix the baseline left: another path, compared within rounding
    client = openai.OpenAI(base_url=f"{fp32_server}/v1", api_key="unused", max_retries=0, timeout=120)
    ids = httpx.post(f"{fp32_server}/tokenize", json={"messages": ASKED}).json()["tokens"]
    baseline = chat(client, ASKED, logprobs=True, top_logprobs=2)
    reused = chat(client, OTHER, kv_transfer_params={"prompt_token_ids": ids}, logprobs=True)
    assert reused.usage.prompt_tokens == len(ids) == baseline.usage.prompt_tokens
    steps = baseline.choices[0].logprobs.content
    tops = [{top.token: top.logprob for top in step.top_logprobs} for step in steps]
    answer = [step.token for step in reused.choices[0].logprobs.content]
    assert_same_greedy_tokens(answer, [step.token for step in steps], tops)
    echoed = chat(client, OTHER, kv_transfer_params={"prompt_token_ids": ids}, echo=True)
    assert echoed.usage.prompt_tokens != len(ids)  # echo needs the messages: the ids are ignored, as vLLM


def test_what_asks_a_kv_connector_for_something_is_accepted_and_changes_nothing(client, kvtool_server):
    params = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None}
    assert chat(client, ASKED, kv_transfer_params=params).choices[0].message.content
    completion = httpx.post(
        f"{kvtool_server}/v1/completions", json={"prompt": "Hi", "max_tokens": 2, "kv_transfer_params": params}
    )
    assert completion.status_code == 200, completion.text


@pytest.mark.parametrize(
    "ids, message",
    [
        ([], messages.FORWARDED_IDS_INVALID),
        ([1, -2], messages.FORWARDED_IDS_INVALID),
        ([1, True], messages.FORWARDED_IDS_INVALID),
        ("1 2", messages.FORWARDED_IDS_INVALID),
        ([1, 10**6], messages.TOKEN_OUT_OF_VOCAB.format(token_id=10**6)),
    ],
)
def test_malformed_forwarded_ids_are_refused_naming_them(kvtool_server, ids, message):
    body = {"messages": OTHER, "max_tokens": 2, "kv_transfer_params": {"prompt_token_ids": ids}}
    error = httpx.post(f"{kvtool_server}/v1/chat/completions", json=body).json()["error"]
    param = "kv_transfer_params.prompt_token_ids"
    assert error["param"] == param and error["message"] == messages.with_parameter(message, param)
