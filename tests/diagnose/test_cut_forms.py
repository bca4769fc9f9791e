"""Answers cut at an output cap, whoever set it (caps.py, clients.py), told the ways fresh reports tell it: another
language, a client's or a trainer's own default, the model's generation config, a cap a wrapper's config sets.
Where something else ends the answers (stop strings, the end-of-sequence token), no cap is named."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

USAGE_16 = "length CompletionUsage(completion_tokens=16, prompt_tokens=21, total_tokens=37)"


def causes(text: str) -> list:
    return [f for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


def cap_of(text: str) -> tuple[int, list[str]]:
    """The cap the first finding names and the settings its fixes change."""
    [finding, *_] = causes(text)
    assert finding.category == "max_tokens_default_truncation"
    return finding.numbers["default_max_tokens"], [fix.param or fix.flag for fix in finding.fixes]


@pytest.mark.parametrize(
    "told",
    [
        "出力がいつも途中で切れます。",
        "답변이 항상 중간에 끊겨요.",
        "Las respuestas salen cortadas a la mitad.",
        "Die Antworten werden immer abgeschnitten.",
        "Ответы всегда обрезаются на середине.",
        "As respostas vêm cortadas.",
    ],
    ids=["japanese", "korean", "spanish", "german", "russian", "portuguese"],
)
def test_a_cut_told_in_another_language_at_16_tokens_is_vllms_default(told):
    text = f"{told}\nclient.completions.create(model='m', prompt=p)\n{USAGE_16}"
    assert cap_of(text)[0] == 16


CLIENT_DEFAULTS = {
    "langchain completion class": (
        "from langchain_openai import OpenAI\nllm = OpenAI(base_url='http://vllm:8000/v1', model='qwen')\n"
        "Summaries always stop mid-sentence.\n"
        "{'token_usage': {'completion_tokens': 256, 'prompt_tokens': 900}, 'finish_reason': 'length'}",
        256,
        "max_tokens",
    ),
    "lm-eval without max_gen_toks": (
        "lm_eval --model local-completions --model_args model=qwen,base_url=http://127.0.0.1:8000/v1/completions "
        "--tasks gsm8k\nThe generated answers are truncated before the final number.",
        256,
        "max_gen_toks",
    ),
    "trl's trainer config": (
        "GRPOConfig(output_dir='out', use_vllm=True, vllm_gpu_memory_utilization=0.4)\n"
        "The completions are always cut off and the format reward stays at 0.",
        512,
        "max_completion_length",
    ),
    "llamaindex vllm": (
        "from llama_index.llms.vllm import Vllm\nllm = Vllm(model='mistral', tensor_parallel_size=1)\n"
        "La respuesta sale cortada siempre.",
        512,
        "max_new_tokens",
    ),
}


@pytest.mark.parametrize("text, cap, param", CLIENT_DEFAULTS.values(), ids=CLIENT_DEFAULTS)
def test_a_clients_own_default_is_the_cap_and_its_setting_the_fix(text, cap, param):
    found, knobs = cap_of(text)
    assert found == cap and knobs[0] == param


def test_a_client_given_another_cap_is_not_at_its_default():
    text = (
        "GRPOConfig(max_completion_length=2048, use_vllm=True)\nThe completions are cut off.\n"
        "completions/mean_length 2048"
    )
    assert all(f.numbers.get("default_max_tokens") != 512 for f in causes(text))


GENERATION_CONFIG = (
    "INFO 09-30 11:02:31 [serving_chat.py:139] Using default chat sampling params from model: "
    "{'temperature': 0.7, 'top_p': 0.8, 'max_tokens': 1024}"
)


@pytest.mark.parametrize(
    "answer",
    [
        'Each reply ends at exactly 1024 completion tokens with finish_reason "length", though we send max_tokens 8192.',
        '{"choices":[{"finish_reason":"length"}],"usage":{"prompt_tokens":80,"completion_tokens":1024}}',
        "ChatCompletion(choices=[Choice(finish_reason='length')], usage=CompletionUsage(completion_tokens=1024))",
    ],
    ids=["prose", "json body", "python repr"],
)
def test_answers_at_the_models_generation_config_cap(answer):
    found, knobs = cap_of(f"{GENERATION_CONFIG}\n{answer}")
    assert found == 1024 and knobs[0] == "--generation-config"


@pytest.mark.parametrize(
    "text, cap, param",
    [
        (
            "Answers in our chat flow are cropped mid-list.\n```yaml\ncompletion_params:\n  max_tokens: 512\n"
            "  temperature: 0.7\n```",
            512,
            "max_tokens",
        ),
        (
            "用 OpenCompass 评测，回答都被截断了。\nmodels = [dict(abbr='qwen', max_out_len=256, max_seq_len=32768)]",
            256,
            "max_out_len",
        ),
        (
            'Las respuestas salen truncadas. Config del gateway: {"max_tokens": 300, "temperature": 0.2}',
            300,
            "max_tokens",
        ),
    ],
    ids=["a chat app's yaml", "a harness's config in chinese", "a gateway's json in spanish"],
)
def test_a_short_cap_the_paste_sets_is_the_cut(text, cap, param):
    found, knobs = cap_of(text)
    assert found == cap and knobs[0] == param


@pytest.mark.parametrize(
    "text",
    [
        "The answers are cut off early. SamplingParams(max_tokens=512, stop=['\\n\\n'])",
        "Responses are truncated after the first paragraph; max_tokens is 512. The chat template adds the EOS token "
        "after each turn.",
        "Answers end abruptly, although max_tokens is 4096 and the context is 32768.",
        '{"choices":[{"finish_reason":"stop"}],"usage":{"completion_tokens":212}} answers look truncated, max_tokens=256',
    ],
    ids=["stop strings", "the eos token", "a long cap and no count", "ended by itself"],
)
def test_a_cut_something_else_explains_names_no_cap(text):
    assert causes(text) == []
