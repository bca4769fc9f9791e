"""What a finding carries beside its message's numbers: the settings its fixes are sized on where the paste states
them (settings.py), the load a runtime failure happened under, what a refused request asked for; and what a wording
already explained is not read again by a rule."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 44.53 GiB "
    "of which 1.02 GiB is free. Including non-PyTorch memory, this process has 43.50 GiB memory in use."
)
STATS = (
    "INFO 11-12 10:44:18 [loggers.py:127] Engine 000: Avg prompt throughput: 8841.3 tokens/s, Avg generation "
    "throughput: 212.6 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 31.4%, Prefix cache hit rate: "
    "2.1%"
)


def causes(text: str) -> list:
    return [f for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


@pytest.mark.parametrize(
    "launch",
    [
        "vllm serve Qwen/Qwen2.5-14B --max-num-seqs 256 --max-num-batched-tokens 16384",
        "non-default args: {'model': 'Qwen/Qwen2.5-14B', 'max_num_seqs': 256, 'max_num_batched_tokens': 16384}",
        "启动参数：--max-num-seqs 256 --max-num-batched-tokens 16384",
    ],
    ids=["flags", "vllm's args line", "chinese prose"],
)
def test_an_oom_under_load_carries_the_launch_and_the_load(launch):
    [finding] = causes(f"{launch}\n{STATS}\n{OOM}")
    assert finding.category == "cuda_oom_runtime"
    assert (finding.numbers["max_num_seqs"], finding.numbers["max_num_batched_tokens"]) == (256, 16384)
    assert (finding.numbers["num_running"], finding.numbers["kv_cache_usage_percent"]) == (12, 31.4)


def test_an_oom_at_start_up_carries_the_weights_and_the_kv_budget():
    text = (
        "INFO [gpu_model_runner.py:2653] Model loading took 1.0627 GiB and 3.90 seconds\n"
        "INFO [gpu_worker.py:298] Available KV cache memory: 19.37 GiB\n"
        "ERROR [core.py:708] RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. "
        "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
    )
    [finding] = causes(text)
    assert (finding.numbers["weights_gib"], finding.numbers["kv_available_gib"]) == (1.0627, 19.37)


@pytest.mark.parametrize(
    "request_shown",
    [
        "requestBodyValues: {\n  model: 'Qwen/Qwen3-32B',\n  max_tokens: 8192,\n  stream: true\n}",
        '{"model": "qwen3", "messages": [], "max_tokens": 8192}',
        "GRPOConfig(max_completion_length=8192, use_vllm=True)",
    ],
    ids=["a js client's body", "a json body", "a trainer's config"],
)
def test_a_prompt_over_the_context_carries_what_the_request_asked_for(request_shown):
    message = "ValueError: Prompt length of 52118 is longer than the maximum model length of 40960."
    [finding] = causes(f"{message}\n{request_shown}")
    assert finding.numbers["max_tokens"] == 8192
    assert finding.numbers["prompt_overflow_tokens"] == 52118 - 40960  # the prompt alone is over


def test_a_refused_request_says_how_many_tokens_it_needed():
    message = (
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 8192 tokens "
        "and your request has 5210 input tokens (4096 > 8192 - 5210)."
    )
    [finding] = causes(message)
    assert finding.numbers["requested_tokens"] == 9306


def test_paragraphs_parted_by_blank_lines_stay_apart():
    """A short paste whose lines are paragraphs: the launch is not joined onto the error, so the out-of-memory
    error's free and total memory are not read again as a start-up refusal beside the launch's utilization."""
    text = f"用 evalscope 压测，并发到 200 时服务直接挂了。\n\n{OOM}\n\n启动参数：vllm serve m --gpu-memory-utilization 0.95"
    assert [f.category for f in causes(text)] == ["cuda_oom_runtime"]


def test_a_launch_beside_an_oom_is_not_also_sized_by_the_memory_model():
    text = (
        "vllm serve Qwen/Qwen2.5-32B-Instruct --max-model-len 8192 on one A100 40GB\n"
        "ERROR [core.py:708] EngineCore failed to start.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 0 has a total capacity of "
        "39.39 GiB of which 205.38 MiB is free."
    )
    assert [f.category for f in causes(text)] == ["cuda_oom_startup"]
