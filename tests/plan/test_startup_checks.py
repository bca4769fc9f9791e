"""Start / no start as vLLM decides it: every check in its order, each failing with the chosen release's words."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()


def plan(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["plan", "--gpu-mem", "80GiB", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def first_failure(report: dict) -> dict:
    return next(check for check in report["vllm"]["checks"] if not check["passed"])


@pytest.mark.parametrize(
    "version, start",
    [
        ("0.33", "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization"),
        ("0.12", "CUDA out of memory. Tried to allocate"),
    ],
)
def test_weights_that_do_not_fit(version, start):
    code, report = plan("--model", "llama3.1-70b", "--vllm-version", version)  # 141 GB of bf16 weights
    check = first_failure(report)
    assert code == 1 and check["name"] == "weights" and check["message"].startswith(start)
    assert "GPU 0 has a total capacity of 80.0 GiB" in check["message"]
    assert report["warnings"][0] == check["message"]


@pytest.mark.parametrize(
    "version, text",
    [
        (
            "0.33",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See",
        ),
        (
            "0.13",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
        ),
        (
            "0.6.3",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine.",
        ),
    ],
)
def test_non_positive_kv_memory(version, text):
    # 16 GB of weights in a 0.2 x 80 GiB budget: the weights load, nothing is left for the cache
    code, report = plan(
        "--model",
        "llama3.1-8b",
        "--gpu-memory-utilization",
        "0.2",
        "--max-model-len",
        "8192",
        "--vllm-version",
        version,
    )
    check = first_failure(report)
    assert code == 1 and check["name"] == "kv_memory" and check["message"].startswith(text)


@pytest.mark.parametrize(
    "version, start",
    [
        ("0.33", "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed"),
        ("0.14", "To serve at least one request with the models's max seq len (131072), (16.0 GiB KV cache is needed"),
        ("0.12", "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed"),
        ("0.8.2", "To serve at least one request with the models's max seq len (131072), (16.00 GB KV cache is needed"),
        (
            "0.6.3",
            "The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV "
            "cache (",
        ),
    ],
)
def test_fewer_tokens_than_one_max_model_len_request(version, start):
    code, report = plan(
        "--model",
        "llama3.1-8b",
        "--gpu-memory-utilization",
        "0.35",
        "--vllm-version",
        version,
        "--max-model-len",
        "131072",
        "--max-num-batched-tokens",
        "2048",
    )
    check = first_failure(report)
    assert code == 1 and check["name"] == "one_request" and check["message"].startswith(start)
    estimate = "the estimated maximum model length is" in check["message"]
    assert estimate is (version not in ("0.8.2", "0.6.3"))


@pytest.mark.parametrize(
    "version, text",
    [
        (
            "0.33",
            "Free memory on device cuda:0 (30.0/80.0 GiB) on startup is less than desired GPU memory utilization "
            "(0.92, 73.6 GiB).",
        ),
        (
            "0.13",
            "Free memory on device (30.0/80.0 GiB) on startup is less than desired GPU memory utilization "
            "(0.9, 72.0 GiB).",
        ),
    ],
)
def test_free_memory_below_the_requested_fraction_is_checked_first(version, text):
    code, report = plan("--model", "llama3.1-70b", "--gpu-free", "30GiB", "--vllm-version", version)
    checks = report["vllm"]["checks"]
    assert code == 1 and checks[0]["name"] == "free_memory" and checks[0]["message"].startswith(text)
    assert [c["name"] for c in checks] == ["free_memory", "weights", "kv_memory", "one_request"]


def test_releases_without_the_free_memory_check_charge_or_ignore_other_processes():
    code, v1_early = plan(
        "--model", "llama3.1-8b", "--gpu-free", "60GiB", "--vllm-version", "0.9.0", "--max-model-len", "8192"
    )
    code, v0 = plan(
        "--model", "llama3.1-8b", "--gpu-free", "60GiB", "--vllm-version", "0.6.3", "--max-model-len", "8192"
    )
    assert "free_memory" not in [c["name"] for c in v1_early["vllm"]["checks"] + v0["vllm"]["checks"]]
    assert v1_early["memory"]["other_process_bytes"] == 20 * (1 << 30)  # 0.7-0.9.0 measure total - free
    assert v0["memory"]["other_process_bytes"] == 0  # 0.3.1+ measure from the free memory at init


def test_a_configuration_that_starts_passes_every_check():
    code, report = plan("--model", "llama3.1-8b", "--max-model-len", "32768")
    assert code == 0 and all(check["passed"] for check in report["vllm"]["checks"])
    assert report["vllm"] == {**report["vllm"], "version": "0.33.0", "engine": "V1", "num_cpu_blocks": 0}


def test_the_report_names_the_release_its_log_lines_and_the_check_that_stops_it():
    v0 = runner.invoke(
        app,
        [
            "plan",
            "--model",
            "llama3.1-8b",
            "--gpu",
            "H100-80GB",
            "--vllm-version",
            "0.6.3",
            "--max-model-len",
            "131072",
        ],
    )
    assert v0.exit_code == 0 and "vLLM 0.6.3 V0" in v0.stdout
    assert "vLLM would log: # GPU blocks: " in v0.stdout and ", # CPU blocks: 2048" in v0.stdout
    assert "Maximum concurrency for 131072 tokens per request:" in v0.stdout
    held = runner.invoke(app, ["plan", "--model", "llama3.1-70b", "--gpu-mem", "80GiB", "--gpu-free", "30GiB"])
    assert held.exit_code == 1 and "stops at its 'free memory' check" in held.stdout
    assert "no command: other processes hold the GPU" in held.stdout and "vllm serve   vllm" not in held.stdout


@pytest.mark.parametrize(
    "version, other_gib, non_torch",
    [
        ("0.2.5", 0, 0),  # worker/worker.py: peak = torch.cuda.max_memory_allocated(), the allocator only
        # worker/worker.py: peak = total - free from mem_get_info: every process, and this one's CUDA context
        ("0.2.6", 20, 450 << 20),
        ("0.3.1", 0, 50 << 20),  # peak = free at init (after the context) - free after: other processes drop out
    ],
)
def test_what_the_v0_peak_counts_by_release(version, other_gib, non_torch):
    code, report = plan(
        "--model", "llama3.1-8b", "--gpu-free", "60GiB", "--vllm-version", version, "--max-model-len", "8192"
    )
    assert report["memory"]["other_process_bytes"] == other_gib << 30
    assert report["memory"]["non_torch_bytes"] == non_torch


@pytest.mark.parametrize(
    "version, tail",
    [
        ("0.12", "when initializing the engine."),
        ("0.13", "when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
         " for more details."),
        ("0.21", "when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
         " for more details."),
        ("0.22", "when initializing the engine (this flag also controls CPU memory reservation on the CPU backend,"
         " despite its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
    ],
)  # fmt: skip
def test_no_memory_message_gains_the_url_in_0_13_and_the_cpu_note_in_0_22(version, tail):
    # v1/core/kv_cache_utils.py check_enough_kv_cache_memory, "No available memory for the cache blocks"
    code, report = plan("--model", "llama3.1-8b", "--gpu-memory-utilization", "0.2", "--vllm-version", version)
    message = next(c["message"] for c in report["vllm"]["checks"] if c["name"] == "kv_memory")
    assert message == "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` " + tail
