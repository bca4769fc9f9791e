"""The start-up log reader against real and release-by-release vLLM logs, pasted the ways people paste them.

startup_logs/logs.jsonl: 15 start-up logs from public threads and committed files (`source` names each),
with the figures vLLM printed. startup_logs/releases/*.log: one start-up per release family, each line
written from that release's own format strings (vllm/<file> in its wheel), and expected.json with what
each says. Every figure is read exactly as printed: the reader converts text, so there is no tolerance.
"""

import dataclasses
import json
import random
import re
import time
from pathlib import Path

import pytest

from kvtool.engine.startup_log.reader import MemoryProfile, VllmStartupLog, read_startup_log, read_startup_log_file
from kvtool.errors import UsageError

HERE = Path(__file__).parent / "startup_logs"
PUBLIC = [json.loads(line) for line in (HERE / "logs.jsonl").read_text().splitlines()]
RELEASES = json.loads((HERE / "releases" / "expected.json").read_text())


def public_log(record_id: str) -> str:
    return next(record["log"] for record in PUBLIC if record["id"].startswith(record_id))


def release_log(release: str) -> str:
    with open(HERE / "releases" / f"{release}.log", newline="") as file:  # keep vLLM's \r\n inside messages
        return file.read()


# What a public record states, and where the reader keeps it.
PRINTED = {
    "reported_weights_gib": "weights_memory_gib",
    "reported_available_kv_gib": "available_kv_cache_memory_gib",
    "reported_kv_tokens": "kv_cache_size_tokens",
    "reported_gpu_blocks": "num_gpu_blocks",
    "reported_max_concurrency": "max_concurrency",
    "activation_gib": "peak_activation_memory_gib",
    "non_torch_gib": "non_torch_memory_gib",
    "cuda_graph_gib": "cudagraph_memory_gib",
    "gpu_total_gib": "total_gpu_memory_gib",
}
# What each public log prints of its settings (a record's own settings include defaults and context).
PUBLIC_SETTINGS = {
    "s-01": dict(
        vllm_version="0.10.1.1",
        model="Qwen2-7B-Instruct",
        max_model_len=16384,
        gpu_memory_utilization=0.25,
        num_ranks=1,
    ),
    "s-02": dict(
        vllm_version="0.10.1.1", model="Qwen2-7B-Instruct", max_model_len=16384, gpu_memory_utilization=0.5, num_ranks=1
    ),
    "s-03": dict(vllm_version="0.10.1.1", tensor_parallel_size=2, gpu_memory_utilization=0.25, num_ranks=2),
    "s-04": dict(vllm_version="0.10.1.1", model="Qwen2-7B-Instruct", tensor_parallel_size=2, num_ranks=2),
    "s-05": dict(vllm_version="0.10.1.1", model="Qwen2-7B-Instruct", tensor_parallel_size=2, num_ranks=2),
    "s-06": dict(
        vllm_version="0.10.1.1", model="gpt-oss-120b", tensor_parallel_size=4, gpu_memory_utilization=0.8, num_ranks=4
    ),
    "s-11": dict(
        vllm_version="0.10.0",
        tensor_parallel_size=8,
        enable_expert_parallel=True,
        kv_cache_dtype="fp8",
        device_name="NVIDIA H100 80GB HBM3",
        num_ranks=8,
    ),
    "s-12": dict(vllm_version="0.10.0", tensor_parallel_size=8, kv_cache_dtype="fp8", max_model_len=32768, num_ranks=8),
    "s-14": dict(vllm_version="0.10.2", dtype="float16", max_num_seqs=1, gpu_memory_utilization=0.9, num_ranks=1),
    "s-16": dict(
        vllm_version="0.11.0+582e4e37.nv25.11", quantization="gptq", max_model_len=32768, model="/models/mistral-7b"
    ),
    "s-20": dict(vllm_version="0.19.1", dtype="float16", gpu_memory_utilization=0.85, cudagraph_memory_profiling=False),
    "s-22": dict(vllm_version="0.10.2", served_model_name="llava-1.5-7b-hf-awq", max_model_len=4096),
    "s-25": dict(
        vllm_version="0.15.2rc1.dev93+g11a4c9d30.cu128",  # from the wheel's name
        model="./Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",  # from the quoted command line
        pipeline_parallel_size=2,
        gpu_memory_utilization=0.9,
        num_ranks=None,
    ),
    "s-28": dict(vllm_version=None, model=None, num_ranks=None),
    "s-30": dict(vllm_version="0.10.2", model="/root/autodl-tmp/models/qwen/Qwen2.5-3B", max_model_len=4096),
}


@pytest.mark.parametrize("record", PUBLIC, ids=[record["id"] for record in PUBLIC])
def test_public_log_gives_the_figures_vllm_printed(record):
    log = read_startup_log(record["log"])
    for key, name in PRINTED.items():
        expected = record[key]
        if name == "available_kv_cache_memory_gib" and not record["startup_ok"]:
            assert log.failure.available_kv_cache_memory_gib == expected
        else:
            assert getattr(log.memory, name) == expected, name
    assert (log.failure is None) == record["startup_ok"]
    assert log.engine == "V1"  # printed, or the wording of a V1 error
    for name, value in PUBLIC_SETTINGS[record["id"][:4]].items():
        assert getattr(log, name) == value, name


def test_every_rank_keeps_its_own_figures_and_the_smallest_budget_is_the_log_s():
    """vLLM 0.10.0 on 8 ranks: each prints its KV budget and tokens; the engine keeps the smallest."""
    log = read_startup_log(public_log("s-11"))
    budgets = log.rank_figures["available_kv_cache_memory_gib"]
    assert sorted(budgets) == [35.65] * 6 + [35.74, 36.12]
    assert log.memory.available_kv_cache_memory_gib == min(budgets)
    assert log.memory.kv_cache_size_tokens == min(log.rank_figures["kv_cache_size_tokens"]) == 1_590_736
    assert log.memory.num_gpu_blocks * 16 == log.memory.kv_cache_size_tokens


def test_ray_s_repeated_lines_count_as_the_ranks_that_printed_them():
    log = read_startup_log(public_log("s-06"))
    assert log.rank_figures["available_kv_cache_memory_gib"] == (45.32,) * 4


def test_a_failed_start_gives_vllm_s_figures_and_its_words():
    log = read_startup_log(public_log("s-25"))
    failure = log.failure
    assert (failure.category, failure.max_model_len, failure.needed_kv_cache_memory_gib) == (
        "kv_cache_too_small_at_startup",
        262144,
        24.0,
    )
    assert failure.estimated_max_model_len == 34736
    assert "To serve at least one request" in failure.message


# -- every release family, pasted as people paste -----------------------------------------------------------


def coloured(text: str) -> str:
    """vLLM's colour formatter and the cyan process prefix of its workers."""
    text = re.sub(r"\b(INFO|WARNING|ERROR|DEBUG)\b", "\x1b[32m\\1\x1b[0m", text)
    return re.sub(r"(\([\w ,.=]*pid=[^)]*\))", "\x1b[36m\\1\x1b[0m", text)


def hard_wrapped(text: str, width: int = 140) -> str:
    """A file committed with its long lines cut at `width` characters: words and numbers split."""
    lines = text.split("\n")
    return "\n".join(line[start : start + width] for line in lines for start in range(0, max(len(line), 1), width))


def out_of_order(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    random.Random(7).shuffle(lines)
    return "\n".join(lines)


def windows(text: str) -> str:
    return text.replace("\n", "\r\n")


def quoted_in_a_report(text: str) -> str:
    return f"Here is the log:\n\n```\n{text}```\n\nAny idea why the KV cache is so small? Thanks!\n"


def docker_timestamps(text: str) -> str:
    return "\n".join(f"vllm-1  | 2025-06-10T12:00:01.123456789Z {line}" if line else line for line in text.split("\n"))


def everything(text: str) -> str:
    return quoted_in_a_report(windows(hard_wrapped(coloured(text))))


PASTES = [str, coloured, hard_wrapped, out_of_order, windows, quoted_in_a_report, docker_timestamps, everything]


STATED = [
    spec.name
    for spec in dataclasses.fields(VllmStartupLog)
    if spec.name not in ("memory", "rank_figures", "failure", "args")
]


@pytest.mark.parametrize("paste", PASTES, ids=[paste.__name__ for paste in PASTES])
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_release_family_reads_the_same_however_pasted(release, paste):
    stated = RELEASES[release]
    log = read_startup_log(paste(release_log(release)))
    assert {name: getattr(log, name) for name in STATED} == {name: stated.get(name) for name in STATED}
    memory = {spec.name: stated["memory"].get(spec.name) for spec in dataclasses.fields(MemoryProfile)}
    assert dataclasses.asdict(log.memory) == memory
    assert failure_figures(log) == stated.get("failure")
    for name, values in stated.get("rank_figures", {}).items():
        assert sorted(log.rank_figures[name]) == sorted(values)  # out of order when pasted out of order
    if "args" in stated:
        assert log.args == stated["args"]


def failure_figures(log: VllmStartupLog) -> dict | None:
    if log.failure is None:
        return None
    figures = {name: value for name, value in dataclasses.asdict(log.failure).items() if value is not None}
    assert figures.pop("message")
    return figures


# -- several starts in one file, and bad input --------------------------------------------------------------


def test_a_file_appended_to_by_two_starts_gives_the_last():
    first, second = release_log("0.10.2"), release_log("0.26.0")
    log = read_startup_log(first + "\n" + second)
    assert (log.vllm_version, log.memory.available_kv_cache_memory_gib, log.num_ranks) == ("0.26.0", 14.69, 1)


def test_a_start_that_measured_nothing_does_not_hide_the_one_before():
    banner_only = "(APIServer pid=9) INFO 10-01 08:00:00 [api_server.py:1896] vLLM API server version 0.10.2\n"
    log = read_startup_log(release_log("0.10.2") + banner_only)
    assert log.memory.kv_cache_size_tokens == 113_616


SGLANG = """[2025-03-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen2.5-7B-Instruct', mem_fraction_static=0.88)
[2025-03-01 10:00:05 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=63.41 GB, mem usage=14.29 GB.
[2025-03-01 10:00:05 TP0] KV Cache is allocated. #tokens: 1007536, K size: 26.91 GB, V size: 26.91 GB
"""
LLAMA_CPP = """llama_model_loader: loaded meta data with 29 key-value pairs and 291 tensors from model.gguf (version GGUF V3 (latest))
llama_kv_cache_init:      CUDA0 KV buffer size =  1024.00 MiB
llama_new_context_with_model: KV self size  = 1024.00 MiB, K (f16):  512.00 MiB, V (f16):  512.00 MiB
"""
RUNTIME_ONLY = """(APIServer pid=7) INFO 09-30 18:40:01 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.3%, Prefix cache hit rate: 45.6%
(APIServer pid=7) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""
BAD = {
    "empty": ("", "The start-up log is empty."),
    "blank": (" \r\n\t\n\n", "The start-up log is empty."),
    "sglang": (SGLANG, "This is not a vLLM log"),
    "llama.cpp": (LLAMA_CPP, "This is not a vLLM log"),
    "prose": ("My server will not start, what should I set max_model_len to?\n", "This is not a vLLM log"),
    "truncated": ("\n".join(release_log("0.10.2").splitlines()[:2]), "The log stops before vLLM measured its memory"),
    "runtime only": (RUNTIME_ONLY, "This vLLM log has no start-up memory lines"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_gets_one_line_naming_the_problem_and_the_fix(case):
    text, problem = BAD[case]
    with pytest.raises(UsageError) as raised:
        read_startup_log(text)
    message = str(raised.value)
    assert message.startswith(problem)
    assert "\n" not in message and len(message) < 300
    assert "'GPU KV cache size' (V1) or '# GPU blocks' (V0)" in raised.value.fix


def test_a_truncated_log_names_the_last_line_it_has():
    with pytest.raises(UsageError, match=r"its last vLLM line is \"non-default args: \{'host': 'localhost'"):
        read_startup_log("\n".join(release_log("0.10.2").splitlines()[:2]))


def test_a_file_that_cannot_be_read_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="Cannot read the log file .*missing.log"):
        read_startup_log_file(tmp_path / "missing.log")
    (tmp_path / "latin1.log").write_bytes(release_log("0.9.2").encode() + b"\xe9\xff\n")
    assert read_startup_log_file(tmp_path / "latin1.log").memory.num_gpu_blocks == 538


def test_a_5_mb_log_takes_well_under_a_second_of_cpu():
    """A start-up followed by 5 MB of serving (stats and access lines); about 0.25 s measured on one core."""
    serving = (
        "(APIServer pid=943457) INFO 09-30 18:40:01 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 "
        "tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: "
        '12.3%, Prefix cache hit rate: 45.6%\n(APIServer pid=943457) INFO:     127.0.0.1:51234 - "POST '
        '/v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    text = release_log("0.10.2") + serving * (5_000_000 // len(serving))
    started = time.process_time()
    log = read_startup_log(text)
    assert time.process_time() - started < 1.0
    assert log.memory.kv_cache_size_tokens == 113_616


# -- wordings the release logs above do not use -------------------------------------------------------------

VARIANTS = [
    (  # 0.6.4 only
        "INFO 11-18 10:00:00 worker.py:232] Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=15.53GiB "
        "peak_torch_memory=16.31GiB memory_usage_post_profile=15.63GiB non_torch_memory=0.29GiB kv_cache_size=54.76GiB "
        "gpu_memory_utilization=0.90",
        dict(
            total_gpu_memory_gib=79.15,
            peak_torch_memory_gib=16.31,
            non_torch_memory_gib=0.29,
            available_kv_cache_memory_gib=54.76,
        ),
        dict(gpu_memory_utilization=0.9, engine="V0"),
    ),
    (  # V1 in 0.6.4 - 0.7 (VLLM_USE_V1=1)
        "INFO 02-25 10:01:40 gpu_model_runner.py:1060] Loading model weights took 14.9888 GB\n"
        "INFO 02-25 10:01:50 kv_cache_utils.py:522] # GPU blocks: 27721",
        dict(weights_memory_gib=14.9888, num_gpu_blocks=27721),
        dict(),
    ),
    (  # --kv-cache-memory given (0.10.2+): no profiling
        "(EngineCore_DP0 pid=99) INFO 10-01 09:00:00 [gpu_worker.py:270] Initial free memory 23.05 GiB, reserved 12.00GiB "
        "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does does not "
        "respect the gpu_memory_utilization config.",
        dict(free_gpu_memory_gib=23.05, available_kv_cache_memory_gib=12.0),
        dict(engine="V1"),
    ),
    (  # a report that gives its environment instead of the banner
        "vLLM Version: 0.7.3\nvLLM Build Flags:\n...\nINFO 02-25 10:01:50 executor_base.py:111] # cuda blocks: 20725, # CPU blocks: 1638",
        dict(num_gpu_blocks=20725, num_cpu_blocks=1638),
        dict(vllm_version="0.7.3", engine="V0"),
    ),
    (
        "pip install vllm==0.8.5\nINFO 05-02 14:22:31 [kv_cache_utils.py:634] GPU KV cache size: 448,896 tokens",
        dict(kv_cache_size_tokens=448896),
        dict(vllm_version="0.8.5", engine="V1"),
    ),
]


@pytest.mark.parametrize("text, figures, settings", VARIANTS)
def test_other_wordings(text, figures, settings):
    log = read_startup_log(text)
    assert {name: value for name, value in dataclasses.asdict(log.memory).items() if value is not None} == figures
    for name, value in settings.items():
        assert getattr(log, name) == value, name


def test_v0_7_s_failure_is_in_gb():
    log = read_startup_log(
        "ERROR 02-25 10:01:50 core.py:291] ValueError: To serve at least one request with the models's max seq len "
        "(131072), (16.00 GB KV cache is needed, which is larger than the available KV cache memory (9.87 GB). Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    failure = log.failure
    assert (failure.max_model_len, failure.needed_kv_cache_memory_gib, failure.available_kv_cache_memory_gib) == (
        131072,
        16.0,
        9.87,
    )
    assert failure.estimated_max_model_len is None
