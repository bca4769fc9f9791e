"""Recognisers and context reading, line by line."""

import re
from string import Formatter

import pytest

from kvtool.engine.diagnosis import recognisers
from kvtool.engine.diagnosis.anchors import ANCHORS
from kvtool.engine.diagnosis.reader import line_spans
from kvtool.engine.diagnosis.recognisers import PATTERNS
from kvtool.engine.diagnosis.scanner import Scanner
from kvtool.engine.diagnosis.wordings import WORDINGS
from kvtool.engine.startup_log import lines as startup_log_lines


def passes_prefilter(text: str) -> bool:
    return bool(line_spans(text.encode(), ANCHORS))


@pytest.mark.parametrize("wording", WORDINGS, ids=[f"{w.category}:{w.versions}:{w.template[:30]}" for w in WORDINGS])
def test_every_wording_survives_the_prefilter(wording):
    names = {name for _, name, _, _ in Formatter().parse(wording.template) if name}
    assert passes_prefilter(wording.template.format(**{name: "99.5" for name in names})), wording.template


@pytest.mark.parametrize(
    "pattern",
    [p for p in PATTERNS if p.category not in {w.category for w in WORDINGS}]
    + recognisers.TORCH_OOM
    + recognisers.METRICS
    + recognisers.DEFAULT_TRUNCATION,
    ids=lambda p: f"{p.category}:{p.gate}",
)
def test_every_other_gate_survives_the_prefilter(pattern):
    assert passes_prefilter(pattern.gate), pattern.gate


# start-up lines that only ever come inside a longer message with an anchor of its own
INSIDE_OTHERS = {
    "█ version": "the logo's next line: █ model ...",
    "Initializing": "... with config: model=...",
    "vllm-{ver}-cp": "a wheel's name in a pip command",
    "vllm=={ver}": "a pip pin, read where other lines bring it",
    "total consumed": "a debug line among 'Initial free memory', 'Requested memory'",
    "total capacity": "PyTorch's CUDA out of memory",
    "{gib} G": "To serve at least one request with the model's max seq len (...)",
}


@pytest.mark.parametrize("line", startup_log_lines.LINES, ids=lambda line: line.template[:40])
def test_every_start_up_line_survives_the_prefilter(line):
    text = re.sub(
        r"\{(\w+)\}", lambda match: {"_": "x", "path": "org/model", "word": "cuda"}.get(match[1], "1.5"), line.template
    )
    inside = next((why for start, why in INSIDE_OTHERS.items() if line.template.startswith(start)), None)
    assert passes_prefilter(text) or inside, line.template


@pytest.mark.parametrize(
    "line, facts",
    [
        (
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 -tp 2 "
            "--kv-cache-dtype fp8 --block-size 32 --no-enable-chunked-prefill",
            dict(
                model="meta-llama/Llama-3.1-8B-Instruct",
                max_model_len=32768,
                gpu_memory_utilization=0.95,
                tensor_parallel_size=2,
                kv_cache_dtype="fp8",
                block_size=32,
                enable_chunked_prefill=False,
            ),
        ),
        (
            "python -m vllm.entrypoints.openai.api_server --model=Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64 "
            "--max-num-batched-tokens 4096 --served-model-name qwen",
            dict(
                model="Qwen/Qwen2.5-7B-Instruct", max_num_seqs=64, max_num_batched_tokens=4096, served_model_name="qwen"
            ),
        ),
        (
            "non-default args: {'model': 'Qwen/Qwen3-8B', 'max_model_len': 65536, 'enable_chunked_prefill': False}",
            dict(model="Qwen/Qwen3-8B", max_model_len=65536, enable_chunked_prefill=False),
        ),
        (
            "Initializing a V1 LLM engine (v0.10.1) with config: model='meta-llama/Llama-3.1-70B-Instruct', "
            "max_seq_len=131072, tensor_parallel_size=4, served_model_name=llama",
            dict(
                version="0.10.1",
                model="meta-llama/Llama-3.1-70B-Instruct",
                max_model_len=131072,
                tensor_parallel_size=4,
            ),
        ),
        (
            "the current vLLM instance can use total_gpu_memory (79.11GiB) x gpu_memory_utilization (0.90) = 71.20GiB",
            dict(total_gpu_gib=79.11, gpu_memory_utilization=0.9),
        ),
        ("Loading model weights took 14.9889 GB", dict(weights_gib=14.9889)),
        (
            "GPU KV cache size: 123,456 tokens, Maximum concurrency for 32,768 tokens per request: 3.77x",
            dict(kv_cache_tokens=123456, max_concurrency=3.77, max_model_len=32768),
        ),
        ("# cuda blocks: 4096, # CPU blocks: 2048", dict(num_gpu_blocks=4096)),
        ("vLLM API server version 0.6.3.post1", dict(version="0.6.3.post1")),
    ],
)
def test_context_reads_launch_flags_and_startup_lines(line, facts):
    """vLLM's start-up lines through the start-up reader (startup.py), the flags also where people write them."""
    assert passes_prefilter(line)
    context = Scanner().scan([line]).context
    assert {name: getattr(context, name) for name in facts} == facts


@pytest.mark.parametrize(
    "line, facts",
    [
        (
            "llm = LLM(model='Qwen/Qwen3-8B', max_model_len=16384, gpu_memory_utilization=0.8)",
            dict(max_model_len=16384),
        ),
        ('bonito = Bonito("BatsResearch/bonito-v1",gpu_memory_utilization=0.9)', dict(gpu_memory_utilization=0.9)),
        (
            "docker run --gpus all vllm/vllm-openai:v0.8.5 --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192",
            dict(model="Qwen/Qwen2.5-7B-Instruct", max_model_len=8192),
        ),
    ],
)
def test_settings_people_state_outside_vllms_lines_are_read_too(line, facts):
    context = Scanner().scan([line]).context
    assert {name: getattr(context, name) for name in facts} == facts


def test_the_start_up_readers_settings_win_over_those_read_elsewhere():
    lines = [
        "llm = LLM(model='m', max_model_len=8192)",
        "INFO 05-01 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.10.1) with config: model='m', max_seq_len=4096",
    ]
    assert Scanner().scan(lines).context.max_model_len == 4096


def test_auto_and_none_values_stay_unknown():
    context = Scanner().scan(["args: Namespace(model='x/y', max_model_len=None, kv_cache_dtype='auto', block_size=16)"])
    context = context.context
    assert context.max_model_len is None and context.kv_cache_dtype == "auto" and context.block_size == 16


def test_an_oom_after_start_up_is_a_runtime_failure():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 80.00 GiB of which 0.50 GiB is free."
    before = Scanner().scan(['File "gpu_model_runner.py", line 1, in profile_run', oom])
    after = Scanner().scan(["INFO:     Application startup complete.", oom])
    [startup], [runtime] = before.observations.values(), after.observations.values()
    assert (startup.category, startup.detail) == ("cuda_oom_startup", "memory profiling")
    assert runtime.category == "cuda_oom_runtime"


def test_the_same_error_repeated_is_one_observation_with_a_count():
    line = "ValueError: Input length (40000) exceeds model's maximum context length (32768)."
    [obs] = Scanner().scan([line] * 500).observations.values()
    assert obs.count == 500


def test_finish_reason_and_sixteen_tokens_far_apart_are_not_paired():
    lines = ['"finish_reason": "length",'] + ["max filler"] * 100 + ['"completion_tokens": 16']
    assert not Scanner().scan(lines).observations


def test_a_healthy_cache_reading_is_not_a_failure():
    line = "Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 94.9%, Prefix cache hit rate: 0.0%"
    assert not Scanner().scan([line]).observations


def test_many_rejected_requests_are_one_observation_keeping_the_longest():
    lines = [
        f"ValueError: Input length ({n}) exceeds model's maximum context length (32768)." for n in (33000, 40000, 35000)
    ]
    [obs] = Scanner().scan(lines).observations.values()
    assert obs.count == 3 and obs.numbers["prompt_tokens"] == 40000 and "40000" in obs.evidence


def test_a_repeated_line_replays_its_context_facts():
    scanner = Scanner().scan(["Using max model len 4096", "Using max model len 8192", "Using max model len 4096"])
    assert scanner.context.max_model_len == 4096
