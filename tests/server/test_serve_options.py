"""A second real server: a profile with two API keys, a request default and `--overflow reject`; then SIGTERM."""

import signal
import threading

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
KEY, SECOND_KEY = "sekret", "another sekret"
MAX_MODEL_LEN = 64


@pytest.fixture(scope="module")
def server(kvtool_server_process, tmp_path_factory, smollm2_dir):
    server = kvtool_server_process(
        tmp_path_factory.mktemp("serve_options") / "serve.log",
        "--profile",
        "chat-gateway",
        "--api-key",
        KEY,
        "--api-key",
        SECOND_KEY,
        "--default-max-tokens",
        "7",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        "4",
        "--kv-cache-memory",
        "16MiB",
        "--overflow",
        "reject",
    )
    yield server.process, server.base_url
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server[1]}/v1", api_key=KEY, max_retries=0, timeout=120)


def test_the_api_key_is_required_on_v1_routes(server):
    _, base_url = server
    with pytest.raises(openai.AuthenticationError) as caught:
        openai.OpenAI(base_url=f"{base_url}/v1", api_key="wrong", max_retries=0).models.list()
    assert caught.value.status_code == 401
    assert httpx.get(f"{base_url}/v1/models").status_code == 401
    assert httpx.get(f"{base_url}/health").status_code == 200  # probes need no key, as in vLLM
    for key in (KEY, SECOND_KEY):  # any one of the keys, as vLLM's --api-key A B
        assert httpx.get(f"{base_url}/v1/models", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert httpx.get(f"{base_url}/v1/models", headers={"Authorization": f"Bearer {KEY}x"}).status_code == 401


def test_requests_without_max_tokens_get_the_configured_default(client):
    model = client.models.list().data[0].id
    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], extra_body={"ignore_eos": True}
    )
    completion = client.completions.create(model=model, prompt="Hi", extra_body={"ignore_eos": True})
    assert chat.usage.completion_tokens == completion.usage.completion_tokens == 7


def test_overflow_reject_refuses_with_vllm_031s_wording(client):
    prompt = "one two three four five six seven eight nine ten"
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="smollm2", prompt=prompt, max_tokens=60)
    error = caught.value.response.json()["error"]
    assert caught.value.status_code == 400 and error["param"] == "input_tokens"
    # 0.31 tokenizes text only up to max_model_len - max_tokens + 1 = 5 tokens, hence "at least"
    assert error["message"] == (
        "This model's maximum context length is 64 tokens. However, you requested 60 output tokens and your prompt "
        "contains at least 5 input tokens, for a total of at least 65 tokens. Please reduce the length of the input "
        "prompt or the number of requested output tokens. (parameter=input_tokens, value=5)"
    )


def test_sigterm_aborts_running_streams_and_exits_0(server):
    process, base_url = server
    events: list[str] = []

    def stream() -> None:
        body = {
            "messages": [{"role": "user", "content": "Write a long poem."}],
            "max_tokens": 20,
            "stream": True,
            "ignore_eos": True,
        }
        with httpx.stream(
            "POST", f"{base_url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
        ) as response:
            for line in filter(None, response.iter_lines()):
                events.append(line)
                if len(events) == 3:
                    process.send_signal(signal.SIGTERM)

    reader = threading.Thread(target=stream)
    reader.start()
    reader.join(60)
    assert process.wait(30) == 0
    assert events[-1] == "data: [DONE]" and any('"finish_reason": "abort"' in e for e in events)
