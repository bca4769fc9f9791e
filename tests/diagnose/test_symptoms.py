"""Failures that print no error: the 16-token default and a KV cache filling up."""

import pytest

from kvtool.engine.diagnosis import diagnose_text


def categories(text: str) -> list[str]:
    return [finding.category for finding in diagnose_text(text).findings]


@pytest.mark.parametrize(
    "code",
    [
        "sampling_params = SamplingParams(temperature=0.8, top_p=0.95)\n"
        "outputs = llm.generate(prompts, sampling_params)\n",
        "params = SamplingParams(\n    temperature=0.0,\n    stop=['</s>'],\n)\nllm.generate(prompts, params)\n",
        ">>> from vllm import LLM, SamplingParams\n>>> llm.generate('Hello', SamplingParams(n=2))\n",
    ],
)
def test_offline_sampling_params_without_max_tokens_is_the_16_token_default(code):
    [finding] = diagnose_text(code).findings
    assert finding.category == "max_tokens_default_truncation" and finding.numbers["max_tokens"] == 16
    assert finding.fixes[0].param == "max_tokens"


@pytest.mark.parametrize(
    "code",
    [
        "sampling_params = SamplingParams(temperature=0.8, max_tokens=512)\n",
        "params = SamplingParams(\n    temperature=0.0,\n    max_tokens=2048,\n)\n",
        "from vllm import SamplingParams\n",
        "INFO 05-01 14:39:06 [logger.py:41] Received request cmpl-1: params: SamplingParams(n=1, temperature=0.7, "
        "max_tokens=512, min_tokens=0), prompt_token_ids: None.\n",
    ],
)
def test_sampling_params_with_max_tokens_is_not_a_finding(code):
    assert categories(code) == []


@pytest.mark.parametrize(
    "text",
    [
        "Choice(finish_reason=length, index=0, text=' the') usage: completion_tokens: 16, prompt_tokens: 9\n",
        '{"choices": [{"finish_reason": "length"}], "usage": {"completion_tokens": 16, "prompt_tokens": 9}}\n',
    ],
)
def test_finish_reason_length_at_16_tokens(text):
    [finding] = diagnose_text(text).findings
    assert finding.category == "max_tokens_default_truncation" and finding.numbers["completion_tokens"] == 16


@pytest.mark.parametrize(
    "line, numbers",
    [
        (
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 900.0 tokens/s, "
            "Running: 48 reqs, "
            "Waiting: 12 reqs, GPU KV cache usage: 92.4%, Prefix cache hit rate: 10.0%",
            dict(kv_cache_usage_percent=92.4, num_running=48, num_waiting=12),
        ),
        (
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 512.3 tokens/s, "
            "Running: 96 reqs, Swapped: 0 "
            "reqs, Pending: 31 reqs, GPU KV cache usage: 91.0%, CPU KV cache usage: 0.0%.",
            dict(kv_cache_usage_percent=91.0, num_running=96, num_waiting=31),
        ),
        (
            "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
            "Running: 10 reqs, Waiting: 4 reqs "
            "GPU KV cache usage: 93.0%.",
            dict(kv_cache_usage_percent=93.0, num_running=10, num_waiting=4),
        ),
    ],
)
def test_a_cache_above_90_percent_with_requests_waiting_is_preemption(line, numbers):
    [finding] = diagnose_text(line).findings
    assert finding.category == "preemption" and finding.stage == "runtime"
    assert {name: finding.numbers[name] for name in numbers} == numbers
    assert any(fix.flag == "--max-num-seqs" for fix in finding.fixes)


def test_above_90_percent_with_nothing_waiting_is_not_pressure():
    line = (
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 900.0 tokens/s, Running: 48 "
        "reqs, Waiting: 0 reqs, GPU KV cache usage: 92.4%, Prefix cache hit rate: 10.0%"
    )
    assert categories(line) == []
