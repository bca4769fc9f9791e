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


@pytest.mark.parametrize(
    "text, numbers",
    [
        (  # Dynamo: prose only
            'The API returns an incomplete response (finish_reason: "length") when the max_tokens parameter is not '
            "included in the request. When max_tokens is provided, the request completes.",
            {},
        ),
        (  # Xinference: its debug log of a generate config without max_tokens
            "3. max_tokens disabled\n4. the output will still be truncated\nXinference DEBUG LOG\n"
            "generate config: {'temperature': 0.1, 'top_p': 0.3, 'stream': True, 'stop_token_ids': [151643]}",
            {},
        ),
        (  # MLServer: offline LLM.generate with no SamplingParams
            "self.llm = LLM(model=model_name)\n...\ny = self.llm.generate(chat[0])\n"
            "When i run the inference via ML server, it gives me truncated results",
            {"default_max_tokens": 16},
        ),
        (  # LangChain's wrapper built without max_tokens
            "llm = VLLMOpenAI(openai_api_base='http://localhost:8000/v1', model_name='qwen')\n"
            "Every answer gets cut off after a few sentences.",
            {},
        ),
        ("用 Xinference 部署后没有设置max_tokens，输出被截断了", {}),
        (  # a request body without max_tokens on /v1/completions, its answer cut
            'curl localhost:8000/v1/completions -d \'{"model": "qwen", "prompt": "Write a story about"}\'\n'
            '{"choices":[{"text":" a dragon who","finish_reason":"length"}]}',
            {},
        ),
        ("The model only returns a few words.\nllm = VLLMOpenAI(openai_api_base='http://x/v1', model_name='m')", {}),
    ],
)
def test_answers_cut_short_without_max_tokens_are_the_default_cap(text, numbers):
    [finding] = diagnose_text(text).findings
    assert finding.category == "max_tokens_default_truncation" and finding.stage == "request"
    assert {name: finding.numbers[name] for name in numbers} == numbers
    assert finding.fixes[0].param == "max_tokens"


@pytest.mark.parametrize(
    "text",
    [
        "The output is truncated although max_tokens=2048 is set in every request.",
        "outputs = model.generate(input_ids)\nthe text is truncated",  # transformers, not vLLM
        "truncate_prompt_tokens=512 was set; max_tokens is None in the logs of the tokenizer check",
        "The response is incomplete.",
        'curl localhost:8000/v1/completions -d \'{"model": "m", "prompt": "Tell me", "max_tokens": 500}\'\n'
        '"finish_reason": "length"',
        "The KV cache block size is 16 tokens; prompts are truncated at 4096 and max_tokens=512.",
    ],
)
def test_a_cut_without_a_missing_max_tokens_or_the_reverse_is_no_finding(text):
    assert categories(text) == []


STATS = (
    "INFO 09-26 11:20:52 [loggers.py:127] Engine 000: Avg prompt throughput: 6102.8 tokens/s, Avg generation "
    "throughput: 1221.7 tokens/s, Running: 259 reqs, Waiting: 535 reqs, GPU KV cache usage: 82.3%, Prefix cache "
    "hit rate: 32.2%"
)


def test_a_prefix_hit_rate_random_prompts_cannot_reach_is_preemption():
    command = "$ vllm bench throughput --model NousResearch/Hermes-3-Llama-3.1-8B --dataset-name random\n"
    [finding] = diagnose_text(command + STATS).findings
    assert finding.category == "preemption" and "recomputed" in finding.summary
    assert finding.numbers["prefix_cache_hit_rate_percent"] == 32.2
    assert categories(STATS) == []  # with prompts that may share prefixes, 82 % with a queue is no failure


def test_requests_swapped_out_are_preemption():
    line = (
        "INFO 05-05 10:00:00 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 512.3 "
        "tokens/s, Running: 96 reqs, Swapped: 4 reqs, Pending: 0 reqs, GPU KV cache usage: 88.1%, CPU KV cache "
        "usage: 2.4%."
    )
    [finding] = diagnose_text(line).findings
    assert finding.category == "preemption" and finding.numbers["num_swapped"] == 4


def test_preemptions_and_a_full_cache_in_one_log_are_one_finding():
    lines = (
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 tokens/s, Running: 64 reqs, "
        "Waiting: 20 reqs, Preemptions: 12, GPU KV cache usage: 99.8%, Prefix cache hit rate: 12.0%\n"
        "WARNING 10-10 20:41:04 scheduler.py:1491] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. total_num_cumulative_preemption=51\n"
    )
    [finding] = diagnose_text(lines).findings
    assert finding.category == "preemption"
    assert finding.numbers["num_preemptions"] == 12 and finding.numbers["kv_cache_usage_percent"] == 99.8


def test_priority_scheduling_is_noted_beside_preemption():
    lines = (
        "INFO 10-10 20:41:04 scheduler.py:805] _schedule_priority_preemption: waiting_queue is not None.\n"
        "WARNING 10-10 20:41:04 scheduler.py:1491] Sequence group chat-9 is preempted by PreemptionMode.RECOMPUTE "
        "mode because there is not enough KV cache space. total_num_cumulative_preemption=1\n"
    )
    [finding] = diagnose_text(lines).findings
    assert any("Priority scheduling" in note for note in finding.notes)
