"""The chat template as vLLM 0.33 fills it: any message role reaches it, and a request's own template is used
only when the server runs with --trust-request-chat-template."""

import httpx
import openai
import pytest

from kvtool.engine.sizing import messages

pytestmark = pytest.mark.slow
PLAIN_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
HI = [{"role": "user", "content": "hi"}]
TEXT_PART = {"type": "text", "text": "what is 1+1?"}
TRUST = "--trust-request-chat-template"


@pytest.fixture(scope="module")
def trusted_server(kvtool_server_process, tmp_path_factory, smollm2_dir):
    log = tmp_path_factory.mktemp("trusted") / "serve.log"
    server = kvtool_server_process(log, "--max-model-len", "512", "--kv-cache-memory", "64MiB", TRUST)
    yield server.base_url
    server.stop()


def tokens(base_url: str, **body) -> httpx.Response:
    return httpx.post(f"{base_url}/tokenize", json=body, timeout=60)


def test_a_custom_role_reaches_the_template_whatever_the_content_shape(kvtool_server):
    shapes = [[{"role": "my-custom-role", "content": content}] for content in ("what is 1+1?", [TEXT_PART])]
    prompt = tokens(kvtool_server, messages=shapes[0]).json()["tokens"]
    assert tokens(kvtool_server, messages=shapes[1]).json()["tokens"] == prompt
    client = openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)
    for chat in shapes:
        reply = client.chat.completions.create(model="smollm2", messages=chat, temperature=0, max_tokens=8)
        assert reply.usage.prompt_tokens == len(prompt) and reply.choices[0].finish_reason in ("stop", "length")
    custom = tokens(kvtool_server, messages=[{"role": "my-custom-role", "content": "hi"}], return_token_strs=True)
    assert "my" in "".join(custom.json()["token_strs"]) and custom.json()["count"] > 3


@pytest.mark.parametrize("where", ["chat_template", "chat_template_kwargs"])
def test_a_requests_template_is_refused_without_the_flag(kvtool_server, where):
    body = {"messages": HI, "max_tokens": 2}
    body |= {where: PLAIN_TEMPLATE} if where == "chat_template" else {where: {"chat_template": PLAIN_TEMPLATE}}
    for reply in (httpx.post(f"{kvtool_server}/v1/chat/completions", json=body), tokens(kvtool_server, **body)):
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert error["message"] == messages.UNTRUSTED_CHAT_TEMPLATE and error["param"] is None


def test_with_the_flag_the_requests_template_renders_the_prompt(trusted_server):
    plain = tokens(trusted_server, prompt="user: hi\n", add_special_tokens=False).json()["tokens"]
    assert (
        tokens(trusted_server, messages=HI, chat_template=PLAIN_TEMPLATE, add_generation_prompt=False).json()["tokens"]
        == plain
    )
    client = openai.OpenAI(base_url=f"{trusted_server}/v1", api_key="unused", max_retries=0, timeout=120)
    reply = client.chat.completions.create(
        model="smollm2", messages=HI, max_tokens=2, extra_body={"chat_template": PLAIN_TEMPLATE}
    )
    assert reply.usage.prompt_tokens == len(plain)
    default = client.chat.completions.create(model="smollm2", messages=HI, max_tokens=2)
    assert default.usage.prompt_tokens > len(plain)  # the model's own template wraps the message in its tags


@pytest.mark.parametrize("name", ["chat_template", "tokenize"])
def test_the_server_sets_chat_template_and_tokenize_never_the_template_kwargs(trusted_server, name):
    reply = httpx.post(
        f"{trusted_server}/v1/chat/completions",
        json={"messages": HI, "max_tokens": 2, "chat_template_kwargs": {name: PLAIN_TEMPLATE}},
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == f"Found unexpected chat template kwargs from request: {{'{name}'}}"
