"""`--offline`: the workload through the embedded engine in-process, and `--vs hf` against HF generate."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.bench.datasets import RandomDataset
from kvtool.bench.offline import run_offline
from kvtool.bench.runner import BenchConfig
from kvtool.cli.app import app

pytestmark = pytest.mark.slow


def small_config(num_prompts: int, output_len: int) -> BenchConfig:
    return BenchConfig(
        dataset=RandomDataset(input_len=12, output_len=output_len, seed=1), num_prompts=num_prompts, ignore_eos=True
    )


def test_offline_run_times_every_request(smollm2_llm):
    result = run_offline(small_config(3, 5), llm=smollm2_llm)
    summary = result["summary"]
    assert (summary["completed"], summary["total_output_tokens"]) == (3, 15)
    assert summary["total_input_tokens"] >= 36
    assert 0 < summary["mean_ttft_ms"] <= summary["mean_e2el_ms"]
    assert summary["mean_tpot_ms"] > 0 and summary["output_throughput"] > 0


def test_vs_hf_runs_the_same_tokens_at_each_batch_size(smollm2_llm):
    result = run_offline(small_config(2, 3), vs_hf=True, llm=smollm2_llm)
    hf = result["hf"]
    assert hf["total_output_tokens"] == result["summary"]["total_output_tokens"] == 6
    assert set(hf["by_batch_size"]) == {1, 2} and hf["best_batch_size"] in (1, 2)
    assert result["speedup_vs_hf"] == pytest.approx(result["summary"]["output_throughput"] / hf["output_throughput"])


def test_offline_cli_writes_json(smollm2_dir, tmp_path):
    out = tmp_path / "offline.json"
    args = [
        "bench",
        "--offline",
        "--model",
        str(smollm2_dir),
        "-n",
        "2",
        "--input-len",
        "8",
        "--output-len",
        "2",
        "--ignore-eos",
        "--dtype",
        "float32",
        "--max-model-len",
        "256",
        "--json",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["summary"]["total_output_tokens"] == 4
    assert report["dtype"] == "float32"  # the engine ran in the dtype asked for
    assert "kvtool bench --offline" in result.output
