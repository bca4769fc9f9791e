"""vLLM's serve flags that change what answers carry, on a server started with them."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
PROMPT = "Tell me about the history of the city of Paris, its rivers and its bridges."  # more than one KV block


@pytest.fixture(scope="module")
def server(kvtool_server_process, tmp_path_factory, smollm2_dir):
    server = kvtool_server_process(
        tmp_path_factory.mktemp("output_flags") / "serve.log",
        "--max-model-len",
        "512",
        "--kv-cache-memory",
        "64MiB",
        "--max-logprobs",
        "-1",
        "--return-tokens-as-token-ids",
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
        "--enable-per-request-metrics",
    )
    yield server.base_url
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)


TIMING = {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second"}


def test_prompt_tokens_details_count_the_prefix_cache_hit(client):
    first = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=2)
    again = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=2)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert again.usage.prompt_tokens_details.cached_tokens == 16 * ((first.usage.prompt_tokens - 1) // 16)


def test_per_request_metrics_for_one_sequence_only(client):
    reply = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Count."}], max_tokens=4, extra_body={"ignore_eos": True}
    )
    metrics = reply.model_extra["metrics"]
    assert TIMING <= metrics.keys() and all(metrics[name] >= 0 for name in TIMING)
    two = client.completions.create(model="smollm2", prompt="Hi", max_tokens=2, n=2)
    assert two.model_extra["metrics"] is None


def test_forced_usage_rides_every_chunk_and_metrics_the_last(client):
    chunks = list(
        client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=3,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    assert [chunk.usage.completion_tokens for chunk in chunks] == [0, 1, 2, 3, 3]
    assert all("metrics" not in (chunk.model_extra or {}) for chunk in chunks[:-1])
    assert chunks[-1].choices == [] and TIMING <= chunks[-1].model_extra["metrics"].keys()


def test_tokens_read_as_ids_unless_the_request_says_otherwise(client):
    kwargs = dict(model="smollm2", prompt="Hello", max_tokens=2, logprobs=1)
    by_id = client.completions.create(**kwargs).choices[0].logprobs.tokens
    assert all(token.startswith("token_id:") for token in by_id)
    as_text = client.completions.create(**kwargs, extra_body={"return_tokens_as_token_ids": False})
    assert not any(token.startswith("token_id:") for token in as_text.choices[0].logprobs.tokens)


def test_top_logprobs_minus_1_is_the_whole_vocabulary(server):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "logprobs": True, "top_logprobs": -1}
    reply = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=120)
    assert len(reply.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 49152
