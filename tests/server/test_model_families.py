"""`kvtool serve --model <folder>` serves every new family through the official openai client, with
the chat template of its tokenizer config (a Gemma 3 folder in depth, the others with one chat and one
completion each); a tokenizer without a template gets a clear error."""

import openai
import pytest
from families import save_tiny_family, save_tiny_tokenizer

from kvtool.engine.runtime.input_processor import InputProcessor
from kvtool.engine.sizing.engine_config import ModelConfig
from kvtool.engine.sizing.messages import NO_CHAT_TEMPLATE
from kvtool.errors import InvalidRequestError

OTHER_FAMILIES = ["qwen3", "gemma2", "phi3", "qwen3_moe", "mixtral"]


def serve_family(tmp_path_factory, kvtool_server_process, family: str):
    folder = tmp_path_factory.mktemp("served") / f"tiny-{family.replace('_text', '')}"
    save_tiny_family(folder, family)
    save_tiny_tokenizer(folder)
    return kvtool_server_process(
        folder.parent / "serve.log",
        "--model",
        str(folder),
        "--max-model-len",
        "128",
        "--kv-cache-memory",
        "8MiB",
        "--dtype",
        "float32",
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", OTHER_FAMILIES)
def test_serve_answers_chat_and_completions_for_each_family(family, tmp_path_factory, kvtool_server_process):
    server = serve_family(tmp_path_factory, kvtool_server_process, family)
    try:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0, timeout=120)
        name = client.models.list().data[0].id
        chat = client.chat.completions.create(
            model=name,
            messages=[{"role": "user", "content": "Paris?"}],
            max_tokens=4,
            temperature=0.0,
            extra_body={"ignore_eos": True},
        )
        plain = client.completions.create(
            model=name, prompt="Paris?", max_tokens=4, temperature=0.0, extra_body={"ignore_eos": True}
        )
        assert chat.usage.completion_tokens == plain.usage.completion_tokens == 4
        assert chat.usage.prompt_tokens > plain.usage.prompt_tokens  # the chat template's tokens are there
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gemma3_server(tmp_path_factory, kvtool_server_process):
    folder = tmp_path_factory.mktemp("served") / "tiny-gemma3"
    save_tiny_family(folder, "gemma3_text")
    save_tiny_tokenizer(folder)
    server = kvtool_server_process(
        folder.parent / "serve.log",
        "--model",
        str(folder),
        "--max-model-len",
        "256",
        "--kv-cache-memory",
        "8MiB",
        "--dtype",
        "float32",
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_serve_answers_chat_and_completions_for_a_gemma3_folder(gemma3_server):
    client = openai.OpenAI(base_url=f"{gemma3_server.base_url}/v1", api_key="unused", max_retries=0, timeout=120)
    assert client.models.list().data[0].id == "tiny-gemma3"
    chat = client.chat.completions.create(
        model="tiny-gemma3",
        messages=[{"role": "user", "content": "Paris?"}],
        max_tokens=8,
        temperature=0.0,
        extra_body={"ignore_eos": True},
    )
    assert chat.choices[0].finish_reason == "length" and chat.usage.completion_tokens == 8
    # "<|im_start|>user\nParis?<|im_end|>\n<|im_start|>assistant\n": the template's tokens, not the raw text's
    plain = client.completions.create(model="tiny-gemma3", prompt="Paris?", max_tokens=1, temperature=0.0)
    assert chat.usage.prompt_tokens > plain.usage.prompt_tokens + 4
    stream = client.completions.create(
        model="tiny-gemma3",
        prompt="The capital of France is",
        max_tokens=6,
        temperature=0.0,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    streamed = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    whole = client.completions.create(
        model="tiny-gemma3",
        prompt="The capital of France is",
        max_tokens=6,
        temperature=0.0,
        extra_body={"ignore_eos": True},
    )
    assert streamed == whole.choices[0].text


def test_a_tokenizer_without_chat_template_is_refused_clearly(tmp_path):
    from transformers import AutoTokenizer

    save_tiny_tokenizer(tmp_path, chat_template=None)
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path))
    processor = InputProcessor(tokenizer, len(tokenizer), ModelConfig(max_model_len=64))
    with pytest.raises(InvalidRequestError) as refused:
        processor.render_chat([{"role": "user", "content": "hi"}])
    assert refused.value.message == NO_CHAT_TEMPLATE and refused.value.param == "messages"
