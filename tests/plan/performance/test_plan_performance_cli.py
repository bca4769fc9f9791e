"""`kvtool plan --workload` with a load: the JSON `performance` list under `vllm bench serve`'s names, the
table, --slo's answer, --from-log's KV capacity, one-line errors, and plan staying as cheap as before."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()
QWEN3_8B_H100 = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100-80GB", "--vllm-version", "0.12.0"]
METRICS = {f"{stat}_{name}_ms" for stat in ("mean", "median", "p99") for name in ("ttft", "tpot", "itl", "e2el")}


def plan_json(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def test_one_entry_per_workload_and_load_under_vllm_bench_names():
    code, report = plan_json(*QWEN3_8B_H100, "--workload", "chat=1024:256", "--workload", "4096:512",
                             "--max-concurrency", "1,32", "--num-prompts", "200")  # fmt: skip
    assert code == 0
    runs = report["performance"]
    assert [(r["workload"]["name"], r["max_concurrency"]) for r in runs] == [
        ("chat", 1), ("chat", 32), ("4096:512", 1), ("4096:512", 32)
    ]  # fmt: skip
    for run in runs:
        assert METRICS | {"request_throughput", "output_throughput", "total_token_throughput"} <= set(run)
        assert run["bound"] in ("kv_capacity", "compute", "bandwidth", "step_budget", "max_num_seqs")
        assert run["num_prompts"] == 200 and run["request_rate"] == "inf"
    one, many = runs[0], runs[1]
    assert many["output_throughput"] > 10 * one["output_throughput"]  # batching: 32 clients share each step
    assert many["mean_tpot_ms"] > one["mean_tpot_ms"]
    assert report["workloads"][0]["name"] == "chat"  # the memory rows are still there


def test_a_poisson_rate_and_prompts_at_once():
    code, report = plan_json(
        *QWEN3_8B_H100, "--workload", "2048:256", "--request-rate", "2,inf", "--num-prompts", "300"
    )
    slow, flood = report["performance"]
    assert code == 0 and slow["request_rate"] == 2.0 and flood["request_rate"] == "inf"
    assert slow["request_throughput"] == pytest.approx(2.0, rel=0.15)
    assert flood["mean_ttft_ms"] > 10 * slow["mean_ttft_ms"]


def test_kv_capacity_is_the_bound_when_clients_outgrow_the_cache():
    code, report = plan_json(*QWEN3_8B_H100, "--workload", "16000:16000", "--max-concurrency", "128",
                             "--num-prompts", "256")  # fmt: skip
    (run,) = report["performance"]
    assert code == 0 and run["bound"] == "kv_capacity" and run["preemptions"] >= 0
    assert run["mean_ttft_ms"] > 10_000


def test_slo_answers_the_most_clients_and_the_highest_rate():
    code, report = plan_json(*QWEN3_8B_H100, "--workload", "1024:512", "--slo", "ttft_p99=2s,tpot_mean=30ms",
                             "--num-prompts", "300")  # fmt: skip
    (answer,) = report["slo"]
    assert code == 0 and answer["targets"] == {"p99_ttft_ms": 2000.0, "mean_tpot_ms": 30.0}
    assert answer["max_concurrency"] >= 8 and answer["max_request_rate"] > 0
    _, at = plan_json(*QWEN3_8B_H100, "--workload", "1024:512", "--num-prompts", "300",
                      "--max-concurrency", f"{answer['max_concurrency']},{answer['max_concurrency'] + 1}")  # fmt: skip
    meets = [r["p99_ttft_ms"] <= 2000 and r["mean_tpot_ms"] <= 30 for r in at["performance"]]
    assert meets == [True, False]


def test_the_table_the_band_and_the_unchecked_line():
    result = runner.invoke(app, ["plan", "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "MI300X", "--workload", "1024:256",
                                 "--max-concurrency", "8", "--num-prompts", "100"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Served performance" in result.output and "8 clients" in result.output
    assert "band: TTFT ±" in result.output
    assert "outside what real measurements have checked: an AMD GPU, a mixture-of-experts model" in result.output


def test_from_log_plans_on_the_logs_kv_cache(tmp_path):
    """A 0.10.1 log of Qwen2-7B on an A100 at utilization 0.25 holds 93,872 tokens: 32 clients of 8k tokens
    each wait for it, which the same GPU at plan's default utilization does not make them do. (The log names
    no GPU: --gpu names the one it ran on, and the datasheet the forecast uses.)"""
    from from_log_cases import QWEN2_7B, public_log

    log, config = str(public_log(tmp_path, "s-01")), QWEN2_7B
    load = ["--workload", "4096:4096", "--max-concurrency", "32", "--num-prompts", "64"]
    _, logged = plan_json("plan", "--from-log", log, "--model", config, "--gpu", "A100-80GB", *load)
    _, default = plan_json("plan", "--model", config, "--gpu", "A100-80GB", "--vllm-version", "0.10.1", *load)
    assert logged["kv_cache_tokens"] < 100_000 < default["kv_cache_tokens"]
    assert logged["performance"][0]["bound"] == "kv_capacity" != default["performance"][0]["bound"]


@pytest.mark.parametrize(
    "args, problem",
    [
        (
            ["--gpu-mem", "80GiB", "--workload", "1024:256"],
            "no bf16 datasheet figures for '80.00 GiB GPU'. Give --gpu-bandwidth and --gpu-tflops",
        ),
        (["--gpu", "A10G", "--model", "qwen3-0.6b", "--workload", "512:128"], "Give --gpu-bandwidth and --gpu-tflops"),
        (["--gpu", "H100", "--workload", "40000:2000"], "40000 + 2000 tokens exceed max_model_len 40960"),
        (
            ["--gpu", "H100", "--workload", "1024:256", "--slo", "ttft<2s"],
            "--slo 'ttft<2s' is not METRIC_STATISTIC=VALUE",
        ),
        (["--gpu", "H100", "--max-concurrency", "8"], "--max-concurrency needs --workload IN:OUT"),
        (["--gpu", "H100", "--workload", "1024:256", "--request-rate", "0"], "--request-rate '0' is not a list"),
        (["--gpu", "H100", "--workload", "1024:256", "--max-concurrency", "inf"], "--max-concurrency 'inf' is not"),
        (["--gpu", "H100", "--workload", "1024:256", "--gpu-tflops", "fast"], "--gpu-tflops 'fast' is not"),
        (["--gpu", "H100", "--pp", "2", "--model", "qwen3-8b", "--workload", "1024:256"], "not modelled with pipeline"),
        (["--gpu", "H100", "--dp", "2", "--model", "qwen3-8b", "--workload", "1024:256"], "not modelled with data par"),
        (
            [
                "--gpu",
                "H100",
                "--tp",
                "2",
                "--enable-expert-parallel",
                "--model",
                "Qwen/Qwen3-30B-A3B",
                "--workload",
                "1024:256",
            ],
            "not modelled with expert parallelism",
        ),
        (["--gpu", "H100", "--workload", "1024:256", "--lengths", "normal"], "--lengths 'normal' is not one of"),
        (["--gpu", "H100", "--lengths", "exponential"], "--lengths needs --workload IN:OUT"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, problem):
    result = runner.invoke(app, ["plan", "--model", "qwen3-8b", *args] if "--model" not in args else ["plan", *args])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_given_figures_stand_in_for_a_gpu_the_catalog_lacks():
    code, report = plan_json("plan", "--model", "qwen3-0.6b", "--gpu", "A10G", "--gpu-bandwidth", "600",
                             "--gpu-tflops", "70", "--workload", "512:128", "--max-concurrency", "4",
                             "--num-prompts", "40")  # fmt: skip
    assert code == 0 and report["performance"][0]["mean_tpot_ms"] > 0


PROBE = """
import sys
from kvtool.cli.app import app
try:
    app({args!r})
except SystemExit:
    pass
print("LOADED", sorted(m for m in sys.modules if m.startswith("kvtool.engine.plan.performance.")
                       or m in ("torch", "transformers")))
"""


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (
            ["plan", "--model", "qwen3-8b", "--gpu", "H100", "--json"],
            "LOADED ['kvtool.engine.plan.performance.lengths', 'kvtool.engine.plan.performance.load']",
        ),
        (["plan", "--model", "qwen3-8b", "--gpu", "H100", "--workload", "512:64", "--num-prompts", "50", "--json"],
         "kvtool.engine.plan.performance.scheduler"),
    ],
)  # fmt: skip
def test_plan_loads_the_forecast_only_for_a_workload_and_never_torch(args, loaded):
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=60)
    line = next(line for line in out.stdout.splitlines() if line.startswith("LOADED"))
    assert loaded in line and "torch" not in line and "transformers" not in line, out.stderr
