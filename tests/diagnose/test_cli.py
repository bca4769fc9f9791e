"""`kvtool diagnose` through Typer's CliRunner: input from a file or stdin, panels or JSON, exit codes."""

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kvtool.cli.app import app

CORPUS = Path(__file__).parent / "corpus"
runner = CliRunner()


def invoke(*args: str, input: bytes | str | None = None):
    return runner.invoke(app, ["diagnose", *args], input=input)


def test_file_argument_renders_a_panel_with_the_fix():
    result = invoke(str(CORPUS / "kv_v092_models_s.log"))
    assert result.exit_code == 0, result.output
    assert "kv_cache_too_small_at_startup" in result.output
    assert "--max-model-len 78848" in result.output
    assert "--kv-cache-dtype fp8" in result.output


def test_stdin_and_json_follow_the_contract():
    log = (CORPUS / "a2_v063_openai_traceback.log").read_bytes()
    result = invoke("--json", input=log)
    assert result.exit_code == 0, result.output
    finding = json.loads(result.output)["findings"][0]
    assert set(finding) >= {"category", "stage", "summary", "numbers", "fixes", "evidence"}
    assert finding["numbers"]["largest_max_tokens"] == 662
    assert finding["fixes"][0] == {"action": "lower max_tokens", "param": "max_tokens", "value": 662}
    assert all("flag" in fix or "param" in fix for fix in finding["fixes"])


def test_the_other_cause_a_text_allows_is_shown_under_the_main_one():
    result = invoke(
        input="WARNING 10-10 20:41:04 scheduler.py:1090] Input prompt (3000 tokens) is too long and exceeds limit of 2048\n"
    )
    assert result.exit_code == 0, result.output
    main, other = result.output.index("request_too_long"), result.output.index("Or batched_tokens_lt_model_len")
    assert main < other and "--max-num-batched-tokens 3072" in result.output[other:]
    finding = json.loads(invoke("--json", input="RuntimeError: CUDA error: out of memory\n").output)["findings"][0]
    assert finding["stage"] == "unknown"
    assert finding["alternatives"][0]["category"] == "cuda_oom_runtime" and finding["alternatives"][0]["fixes"]


def test_dash_reads_stdin():
    result = invoke("-", "--json", input=(CORPUS / "e1_v033_prompt_alone.log").read_text())
    assert result.exit_code == 0
    assert json.loads(result.output)["findings"][0]["numbers"]["trim_tokens"] == 233


def test_nothing_recognised_exits_1_and_says_what_to_paste():
    result = invoke(input="INFO everything is fine\n")
    assert result.exit_code == 1
    assert "No memory or length failure recognised" in result.output
    assert "Paste the whole failure" in result.output
    assert json.loads(invoke("--json", input="hello\n").output) == {"findings": []}


def test_model_and_gpu_memory_enable_plan_based_fixes():
    message = (
        "ValueError: Free memory on device (40.5/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.92, 72.85 GiB)."
    )
    plain = json.loads(invoke("--json", input=message).output)["findings"][0]
    planned = json.loads(invoke("--json", "--model", "meta-llama/Llama-3.1-8B-Instruct", input=message).output)[
        "findings"
    ][0]
    assert "kv_budget_at_max_utilization_gib" not in plain["numbers"]
    assert planned["numbers"]["kv_budget_at_max_utilization_gib"] > 0
    assert "max_model_len" in planned["fixes"][0]["action"]


def test_gpu_from_the_catalog_sizes_the_longer_context():
    message = (
        "{'error': {'message': \"'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's "
        'maximum context length is 8192 tokens and your request has 7000 input tokens (2000 > 8192 - 7000)."}}'
    )
    result = invoke("--json", "--model", "llama-3.1-8b", "--gpu", "L4", input=message)
    numbers = json.loads(result.output)["findings"][0]["numbers"]
    assert numbers["needed_max_model_len"] == 9216
    assert numbers["kv_max_model_len"] >= 9216


def test_usage_errors_name_the_problem():
    for args, problem in (
        (["/no/such/file.log"], "/no/such/file.log"),
        (["--gpu-mem", "0GiB"], "must be positive"),
        (["--model", "no-such-model-xyz"], "unknown model"),
        (["--gpu", "no-such-gpu"], "no-such-gpu"),
    ):
        result = invoke(*args, input="x")
        assert result.exit_code == 2, args
        assert "kvtool: error:" in result.stderr and problem in result.stderr, args


def test_a_missing_file_is_one_line_and_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "kvtool", "diagnose", "/no/such/file.log"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "/no/such/file.log" in result.stderr
    assert "Traceback" not in result.stderr


def test_diagnose_imports_neither_torch_nor_transformers():
    script = (
        "import sys, runpy; sys.argv = ['kvtool', 'diagnose', '--json', '--model', 'llama-3.1-8b', sys.argv[1]]\n"
        "try:\n    runpy.run_module('kvtool', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "heavy = [name for name in ('torch', 'transformers') if name in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    log = CORPUS / "kv_v033_full_startup_log.log"
    result = subprocess.run([sys.executable, "-c", script, str(log)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "kv_cache_too_small_at_startup" in result.stdout


def test_help_lists_the_plan_panel():
    result = invoke("--help")
    assert result.exit_code == 0
    assert "Plan-based fixes" in result.output and "--gpu-mem" in result.output
