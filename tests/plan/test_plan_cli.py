"""`kvtool plan` through Typer's CliRunner: JSON contract, exit statuses, one-line errors."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery import gpus

runner = CliRunner()
CONTRACT_ARGS = [
    "plan",
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpu-mem",
    "23.58GiB",
    "--gpu-memory-utilization",
    "0.9",
    "--max-model-len",
    "20000",
    "--json",
]
TOP_KEYS = {
    "kv_bytes_per_token",
    "block_size",
    "num_blocks",
    "kv_cache_tokens",
    "max_model_len",
    "safe_max_model_len",
    "fits",
    "max_concurrency",
    "memory",
    "model",
    "gpu",
    "recommendations",
    "warnings",
}
MEMORY_KEYS = {"budget_bytes", "weights_bytes", "activation_bytes", "kv_cache_bytes"}


def plan_json(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, list(args))
    return result.exit_code, json.loads(result.stdout)


def test_contract_keys_and_values_for_llama_8b_on_a_24_gib_gpu():
    code, report = plan_json(*CONTRACT_ARGS)
    assert code == 0 and report["fits"] is True
    assert TOP_KEYS <= report.keys() and MEMORY_KEYS <= report["memory"].keys()
    assert report["kv_bytes_per_token"] == 131_072 and report["block_size"] == 16
    assert report["max_model_len"] == 20_000
    memory = report["memory"]
    assert report["num_blocks"] == memory["kv_cache_bytes"] // (16 * 131_072)
    # vLLM 0.33 logs int(num_blocks / blocks per request x max_model_len), 1250 blocks of 16 per request
    assert report["kv_cache_tokens"] == int(report["num_blocks"] / 1250 * 20_000)
    assert report["max_concurrency"] == pytest.approx(report["num_blocks"] / 1250, abs=1e-4)
    assert memory["kv_cache_bytes"] == (
        memory["budget_bytes"]
        - memory["weights_bytes"]
        - memory["activation_bytes"]
        - memory["non_torch_bytes"]
        - memory["cudagraph_bytes"]
    )
    assert 20_000 < report["safe_max_model_len"] < report["kv_cache_tokens"]
    assert "--max-model-len 20000" in report["recommendations"]["vllm_serve"]


def test_too_long_exits_1_and_recommends_the_safe_length():
    code, report = plan_json(*CONTRACT_ARGS[:-3], "--max-model-len", "128k", "--json")
    assert code == 1 and report["fits"] is False
    assert report["recommendations"]["max_model_len"] == report["safe_max_model_len"] < 128_000
    assert any("estimated maximum model length is" in w for w in report["warnings"])


def test_fp8_kv_is_recommended_when_it_is_enough():
    code, report = plan_json(*CONTRACT_ARGS[:-3], "--max-model-len", "64k", "--json")
    assert code == 1
    assert report["kv_bytes_per_token_fp8"] == 65_536
    assert report["recommendations"]["kv_cache_dtype"] == "fp8"


def test_auto_max_model_len_is_the_safe_length_and_fits():
    code, report = plan_json(*CONTRACT_ARGS[:-3], "--max-model-len", "auto", "--json")
    assert code == 0 and report["max_model_len"] >= report["safe_max_model_len"]


def test_tensor_parallel_named_gpu_and_workloads():
    code, report = plan_json(
        "plan", "--model", "llama3.1-70b", "--gpu", "H100-80GB", "--tp", "4", "--workload", "rag=6144:2048", "--json"
    )
    assert code == 0
    assert report["kv_bytes_per_token"] == 80 * 2 * 2 * 128 * 2
    assert report["gpu"]["count"] == 4 and report["max_num_batched_tokens"] == 8192  # vLLM's >= 70 GiB default
    (rag,) = report["workloads"]
    assert rag["kv_bytes_per_sequence"] == 8192 * report["kv_bytes_per_token"]
    assert "--tensor-parallel-size 4" in report["recommendations"]["vllm_serve"]


def test_local_config_json(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 4,
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "intermediate_size": 512,
                "vocab_size": 1000,
                "max_position_embeddings": 2048,
            }
        )
    )
    code, report = plan_json("plan", "--model", str(tmp_path), "--gpu-mem", "8GiB", "--json")
    assert code == 0 and report["kv_bytes_per_token"] == 4 * 2 * 2 * 64 * 2
    assert report["max_model_len"] == report["safe_max_model_len"] == 2048


def test_rich_output_names_the_numbers():
    result = runner.invoke(app, CONTRACT_ARGS[:-1])
    assert result.exit_code == 0
    assert "131,072" in result.stdout and "Maximum concurrency for 20,000 tokens per request" in result.stdout
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 20000" in result.stdout


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--model", "no-such-model", "--gpu-mem", "24GiB"], "unknown model 'no-such-model'"),
        (["--gpu-mem", "0GiB"], "--gpu-mem must be positive"),
        (["--gpu-mem", "-3GiB"], "is not a memory size"),
        (["--gpu-mem", "24GiB", "--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
        (["--gpu-mem", "24GiB", "--gpu-memory-utilization", "0"], "must be in (0, 1]"),
        (
            ["--gpu-mem", "24GiB", "--model", "llama3.1-8b", "--tp", "3"],
            "must be divisible by tensor parallel size (3)",
        ),
        (["--gpu-mem", "24GiB", "--tp", "0"], "--tp must be at least 1"),
        (["--gpu-mem", "24GiB", "--max-model-len", "lots"], "max_model_len 'lots' is not a whole number"),
        (["--gpu-mem", "24GiB", "--workload", "6144"], "is not PROMPT:OUTPUT"),
        (["--gpu", "H1000"], "unknown GPU 'H1000'"),
        (["--gpu-mem", "24GiB", "--kv-cache-dtype", "int3"], "does not accept --kv-cache-dtype int3"),
        (["--gpu-mem", "24GiB", "--kv-cache-dtype", "float32"], "vLLM 0.33.0 does not accept --kv-cache-dtype float32"),
        (["--gpu-mem", "24GiB", "--kv-cache-dtype", "bfloat16", "--vllm-version", "0.10"], "does not accept"),
        (["--gpu-mem", "24GiB", "--vllm-version", "0.1"], "outside the releases plan models"),
        (["--gpu-mem", "24GiB", "--vllm-version", "latest"], "is not a release number"),
        (["--gpu-mem", "24GiB", "--quantization", "int3"], "unknown quantization 'int3'"),
        (["--gpu-mem", "24GiB", "--limit-mm-per-prompt", "image"], "is not MODALITY=COUNT pairs"),
        (["--gpu-mem", "24GiB", "--gpu-free", "30GiB"], "--gpu-free must be positive and at most"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, problem):
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_malformed_config_and_unreadable_gguf_exit_2(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.gguf").write_bytes(b"not a gguf file at all")
    for path, problem in ((tmp_path / "config.json", "not valid JSON"), (tmp_path / "model.gguf", "cannot read GGUF")):
        result = runner.invoke(app, ["plan", "--model", str(path), "--gpu-mem", "24GiB"])
        assert result.exit_code == 2 and problem in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_no_gpu_and_none_named_exits_2(monkeypatch):
    monkeypatch.setattr(gpus, "read_local_gpus", lambda indices=None: [])
    result = runner.invoke(app, ["plan"])
    assert result.exit_code == 2 and "--gpu H100-80GB" in result.stderr


def test_catalog_listings():
    result = runner.invoke(app, ["plan", "--list-models", "--list-gpus"])
    assert result.exit_code == 0 and "deepseek-ai/DeepSeek-V3" in result.stdout and "H100-80GB" in result.stdout


IMPORT_PROBE = """
import sys
from kvtool.cli.app import app
try:
    app({args!r})
except SystemExit:
    pass
print("HEAVY", sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["plan", "--help"], CONTRACT_ARGS, ["plan", "--model", "smollm2", "--gpu", "L4"]]
)
def test_help_and_plan_import_neither_torch_nor_transformers(args):
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE.format(args=args)], capture_output=True, text=True, timeout=60
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


LIGHT_PROBE = """
import runpy, sys
sys.argv = ["kvtool", *{args!r}]
try:
    runpy.run_module("kvtool", run_name="__main__")
except SystemExit:
    pass
heavy = ("torch", "transformers", "fastapi", "uvicorn", "openai", "httpx", "numpy", "huggingface_hub")
others = ("serve", "bench", "watch", "alerts", "diagnose", "profiles")
print("LOADED", sorted([m for m in heavy if m in sys.modules] + [c for c in others if "kvtool.cli." + c in sys.modules]))
"""


@pytest.mark.parametrize("args", [CONTRACT_ARGS, ["plan", "--model", "llama3.1-8b", "--gpu", "H100", "--json"]])
def test_plan_loads_neither_the_other_commands_nor_their_libraries(args):
    """`kvtool plan` imports its own command only: no server, client, array or Hub library."""
    out = subprocess.run(
        [sys.executable, "-c", LIGHT_PROBE.format(args=args)], capture_output=True, text=True, timeout=60
    )
    assert "LOADED []" in out.stdout, out.stdout + out.stderr


def test_plan_on_a_local_config_json_imports_neither_torch_nor_transformers(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "vocab_size": 100,
            }
        )
    )
    args = ["plan", "--model", str(tmp_path / "config.json"), "--gpu-mem", "1GiB", "--json"]
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE.format(args=args)], capture_output=True, text=True, timeout=60
    )
    assert '"fits": true' in out.stdout and "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_the_cpu_engine_plan_of_a_gguf_file_counts_its_float32_kv_cache():
    """With a KV budget given outright (the CPU engine), a GGUF file's weights stay quantized by default and
    the engine computes in float32: twice the KV bytes per token of the dequantized bf16 run."""
    _, quantized = plan_json("plan", "--model", "smollm2", "--kv-cache-memory", "1GiB", "--json")
    _, dequantized = plan_json(
        "plan", "--model", "smollm2", "--kv-cache-memory", "1GiB", "--dtype", "bfloat16", "--json"
    )
    _, on_a_gpu = plan_json("plan", "--model", "smollm2", "--gpu-mem", "8GiB", "--json")
    assert quantized["model"]["dtype"] == "float32"
    assert dequantized["model"]["dtype"] == on_a_gpu["model"]["dtype"] == "bfloat16"
    assert quantized["kv_bytes_per_token"] == 2 * dequantized["kv_bytes_per_token"]
    assert quantized["kv_cache_tokens"] * 2 == pytest.approx(dequantized["kv_cache_tokens"], rel=0.01)
    assert any("GGUF weights kept quantized" in w for w in quantized["warnings"])
    assert not any("GGUF" in w for w in dequantized["warnings"] + on_a_gpu["warnings"])
