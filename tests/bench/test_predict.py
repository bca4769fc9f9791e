"""`kvtool bench --predict`: the forecast beside a run is kvtool plan's forecast of that run's model, GPU,
lengths and load; bad combinations are one-line usage errors before any load is sent."""

import json
import math

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvtool.bench.runner import BenchConfig, BenchResult
from kvtool.cli.app import app
from kvtool.cli.bench_predict import predicted
from kvtool.cli.performance_render import comparison_table

runner = CliRunner()


def measured_run(completed: int, prompt: int, output: int, clients: int) -> BenchResult:
    config = BenchConfig(num_prompts=completed, max_concurrency=clients, seed=0)
    summary = {
        "completed": completed,
        "total_input_tokens": completed * prompt,
        "total_output_tokens": completed * output,
    }
    return BenchResult(config=config, model="Qwen/Qwen3-8B", records=[], summary=summary, server=None)


def test_the_forecast_is_plans_for_the_same_model_gpu_lengths_and_load():
    forecast = predicted(measured_run(100, 1000, 200, 8), "H100-80GB", 1, "0.12.0")
    result = runner.invoke(app, ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100-80GB", "--vllm-version", "0.12.0",
                                 "--workload", "1000:200", "--max-concurrency", "8", "--num-prompts", "100", "--json"])  # fmt: skip
    (planned,) = json.loads(result.stdout)["performance"]
    for key in ("mean_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "output_throughput"):
        assert forecast[key] == pytest.approx(planned[key], rel=1e-3)


def test_the_comparison_states_each_error_and_marks_those_outside_the_band():
    predicted_metrics = {"mean_ttft_ms": 100.0, "p99_ttft_ms": 200.0, "mean_tpot_ms": 10.0, "p99_tpot_ms": 12.0,
                         "mean_itl_ms": 10.0, "p99_itl_ms": 30.0, "mean_e2el_ms": 2000.0, "request_throughput": 4.0,
                         "output_throughput": 800.0, "total_token_throughput": 4800.0}  # fmt: skip
    measured = {**predicted_metrics, "mean_tpot_ms": 20.0, "output_throughput": 400.0}
    console = Console(width=120, force_terminal=True, color_system="standard")
    with console.capture() as captured:
        console.print(comparison_table(predicted_metrics, measured))
    rows = {line.split("│")[1].strip(): line for line in captured.get().splitlines() if line.startswith("│ ")}
    assert "10.0" in rows["TPOT"] and "20.0" in rows["TPOT"] and "-50%" in rows["TPOT"]
    assert "\x1b[31m" in rows["TPOT"]  # red: outside its ±8% band
    assert "+0%" in rows["TTFT"] and "\x1b[31m" not in rows["TTFT"]


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--predict"], "--predict needs the GPU the server runs on"),
        (["--gpu", "H100"], "--gpu names the server's GPU for --predict"),
        (["--predict", "--gpu", "A10G"], "no datasheet figures for 'A10G'"),
        (["--predict", "--gpu", "H100", "--offline"], "not the embedded engine offline"),
    ],
)
def test_bad_predict_options_are_one_line_exit_2(args, problem):
    result = runner.invoke(app, ["bench", "-n", "1", *args])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_rate_loads_are_forecast_as_poisson():
    run = measured_run(200, 512, 128, None)
    run.config = BenchConfig(num_prompts=200, request_rate=2.0, seed=0)
    assert predicted(run, "H100-80GB", 1, "0.12.0")["request_throughput"] == pytest.approx(2.0, rel=0.15)
    assert math.isinf(BenchConfig().request_rate)
