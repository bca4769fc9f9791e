"""A real server with vLLM's flags and variables: --root-path, VLLM_API_KEY, --enable-server-load-tracking,
--enable-prompt-embeds, --enable-request-id-headers, --enable-tokenizer-info-endpoint, SageMaker's stateful
sessions and a model script that overrides GET /ping."""

import base64
import io
import threading
import time

import httpx
import openai
import pytest
import torch

pytestmark = pytest.mark.slow
KEY = "vllm-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
GREEDY = {"temperature": 0.0}
MODEL_SCRIPT = """async def custom_sagemaker_ping_handler():
    return {"pinged": "by the model's script"}
"""


@pytest.fixture(scope="module")
def server(kvtool_server_process, tmp_path_factory):
    script_dir = tmp_path_factory.mktemp("sagemaker_model")
    (script_dir / "model.py").write_text(MODEL_SCRIPT)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("KVTOOL_API_KEY", raising=False)
        env.setenv("VLLM_API_KEY", KEY)
        env.setenv("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true")
        env.setenv("SAGEMAKER_MODEL_PATH", str(script_dir))
        server = kvtool_server_process(
            tmp_path_factory.mktemp("server_flags") / "serve.log",
            *("--root-path", "/llm", "--enable-server-load-tracking", "--enable-prompt-embeds"),
            *("--enable-request-id-headers", "--enable-tokenizer-info-endpoint"),
            *("--max-model-len", "512", "--max-num-seqs", "8", "--kv-cache-memory", "64MiB"),
        )
    yield server.base_url
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/llm/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def embed(smollm2_dir):
    """text -> base64 of its torch-saved token embeddings (no special tokens), as vLLM's tests make them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    table = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).get_input_embeddings()

    def encode(text: str) -> str:
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids[0]
        buffer = io.BytesIO()
        torch.save(table(ids).detach(), buffer)
        return base64.b64encode(buffer.getvalue()).decode()

    return encode


def test_routes_answer_under_the_root_path_and_without_it_behind_vllms_key_variable(server):
    for prefix in ("/llm", ""):
        assert httpx.get(f"{server}{prefix}/v1/models", headers=AUTH).json()["data"][0]["id"] == "smollm2"
        assert httpx.get(f"{server}{prefix}/v1/models").status_code == 401
        assert httpx.get(f"{server}{prefix}/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.get(f"{server}{prefix}/health").status_code == 200
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server}/llm/v1", api_key="nope", max_retries=0).models.list()


@pytest.mark.parametrize("path", ["/v2/embed", "/inference/v1/generate", "/cohere/v2/rerank"])
def test_the_key_guards_the_paths_vllm_guards_served_or_not(server, path):
    assert httpx.post(f"{server}{path}", json={}).status_code == 401
    assert httpx.post(f"{server}{path}", json={}, headers=AUTH).status_code == 404


def test_the_key_takes_any_case_of_bearer_and_a_cors_preflight_needs_none(server):
    assert httpx.get(f"{server}/v1/models", headers={"Authorization": f"bearer {KEY}"}).status_code == 200
    assert httpx.get(f"{server}/v1/models", headers={"Authorization": KEY}).status_code == 401
    assert httpx.options(f"{server}/v1/models").status_code != 401


def wait_for_load(server: str, expected: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(f"{server}/load").json()["server_load"] != expected:
        assert time.monotonic() < deadline, f"server_load never became {expected}"
        time.sleep(0.05)


def test_load_counts_generation_requests_in_flight_and_a_client_that_leaves(server):
    wait_for_load(server, 0)
    body = {"prompt": "Tell me a story", "max_tokens": 120, "ignore_eos": True}
    whole = threading.Thread(
        target=lambda: httpx.post(f"{server}/v1/completions", json=body, headers=AUTH, timeout=300)
    )
    whole.start()
    wait_for_load(server, 1)
    whole.join()
    wait_for_load(server, 0)
    with httpx.stream("POST", f"{server}/llm/v1/completions", json={**body, "stream": True}, headers=AUTH) as stream:
        lines = stream.iter_lines()
        next(lines)
        assert httpx.get(f"{server}/llm/load").json()["server_load"] == 1
    wait_for_load(server, 0, timeout=10.0)  # closed mid-stream: uncounted, not leaked


def test_completions_from_embeddings_answer_as_from_their_text(client, embed):
    text = "Hello, my name is"
    from_text = client.completions.create(model="smollm2", prompt=text, max_tokens=8, **GREEDY)
    kwargs = dict(model="smollm2", prompt=None, max_tokens=8, extra_body={"prompt_embeds": embed(text)}, **GREEDY)
    from_embeds = client.completions.create(**kwargs)
    streamed = "".join(chunk.choices[0].text for chunk in client.completions.create(stream=True, **kwargs))
    assert from_embeds.choices[0].text == from_text.choices[0].text == streamed
    assert from_embeds.usage.prompt_tokens == from_text.usage.prompt_tokens
    mixed = client.completions.create(
        model="smollm2", prompt=text, max_tokens=8, extra_body={"prompt_embeds": [embed("What is an LLM?")]}, **GREEDY
    )
    assert [choice.index for choice in mixed.choices] == [0, 1]  # the embeddings' choices first, as vLLM
    assert mixed.choices[1].text == from_text.choices[0].text


def test_chat_prompt_embeds_parts_answer_as_the_text_they_embed(client, embed):
    text = "Hello, my name is"
    as_text = client.chat.completions.create(
        model="smollm2", max_tokens=10, messages=[{"role": "user", "content": f"{text}\nContinue:"}], **GREEDY
    )
    parts = [{"type": "prompt_embeds", "data": embed(text)}, {"type": "text", "text": "Continue:"}]
    as_parts = client.chat.completions.create(
        model="smollm2", max_tokens=10, messages=[{"role": "user", "content": parts}], **GREEDY
    )
    assert as_parts.choices[0].message.content == as_text.choices[0].message.content
    assert as_parts.usage.prompt_tokens == as_text.usage.prompt_tokens


def refused(client, **kwargs) -> dict:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="smollm2", max_tokens=2, **kwargs)
    return caught.value.response.json()["error"]


def test_embeddings_are_refused_as_vllm_refuses_them(client, embed):
    buffer = io.BytesIO()
    torch.save(torch.zeros(3, 7), buffer)
    narrow = base64.b64encode(buffer.getvalue()).decode()
    cases = [
        ({"prompt_embeds": narrow}, "prompt_embeds", "`prompt_embeds` hidden_size 7 does not match the model's"),
        ({"prompt_embeds": "not base64!"}, "prompt_embeds", "`prompt_embeds` is not valid base64"),
        ({"prompt_embeds": embed("Hi"), "echo": True}, None, "Echo is unsupported with prompt embeds."),
        ({"prompt_embeds": embed("Hi"), "prompt_logprobs": 1}, None, "prompt_logprobs is not compatible with"),
    ]
    for extra, param, message in cases:
        error = refused(client, prompt=None, extra_body=extra)
        assert error["param"] == param and error["message"].startswith(message)
    with pytest.raises(openai.BadRequestError, match="reserved placeholder '<prompt_embeds>'"):
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "a <prompt_embeds>"}])


SESSION_ID, NEW_SESSION_ID, CLOSED_SESSION_ID = (
    "X-Amzn-SageMaker-Session-Id",
    "X-Amzn-SageMaker-New-Session-Id",
    "X-Amzn-SageMaker-Closed-Session-Id",
)


def test_sagemaker_sessions_open_serve_and_close(server):
    invocations = f"{server}/invocations"
    created = httpx.post(invocations, json={"requestType": "NEW_SESSION"})
    session_id, expires = created.headers[NEW_SESSION_ID].split(";")
    assert created.status_code == 200 and session_id and "Expires" in expires
    body = {"prompt": "1 + 1 =", "max_tokens": 3}
    assert httpx.post(invocations, json=body, headers={SESSION_ID: session_id}, timeout=120).status_code == 200
    unknown = httpx.post(invocations, json={"requestType": "CLOSE"}, headers={SESSION_ID: "no-such-session"})
    assert unknown.status_code == 400 and "session not found" in unknown.json()["error"]["message"]
    closed = httpx.post(invocations, json={"requestType": "CLOSE"}, headers={SESSION_ID: session_id})
    assert closed.headers[CLOSED_SESSION_ID] == session_id


def test_a_model_script_answers_get_ping_before_the_default(server):
    assert httpx.get(f"{server}/ping").json() == {"pinged": "by the model's script"}
    assert httpx.post(f"{server}/ping").status_code == 200 and httpx.post(f"{server}/ping").content == b""


def test_every_reply_carries_a_request_id_its_own_or_a_new_one(server):
    made_up = httpx.get(f"{server}/health").headers["x-request-id"]
    assert len(made_up) == 32 and int(made_up, 16) >= 0
    assert httpx.get(f"{server}/health").headers["x-request-id"] != made_up
    assert httpx.get(f"{server}/health", headers={"X-Request-Id": "Custom"}).headers["x-request-id"] == "Custom"


def test_tokenizer_info_is_the_tokenizers_configuration_as_json(server, smollm2_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    info = httpx.get(f"{server}/llm/tokenizer_info").json()
    assert info["tokenizer_class"] == type(tokenizer).__name__
    assert info["chat_template"] == tokenizer.chat_template
    assert (info["bos_token"], info["eos_token"]) == (tokenizer.bos_token, tokenizer.eos_token)
    assert info["added_tokens_decoder"][str(tokenizer.eos_token_id)] == tokenizer.eos_token
    assert "vocab_file" not in info and "merges_file" not in info
    tokenized = httpx.post(f"{server}/tokenize", json={"prompt": "Hello world!"}).json()
    assert info["model_max_length"] >= tokenized["max_model_len"]
