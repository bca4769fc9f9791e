"""How far `kvtool plan --workload`'s served-performance forecast lands from real vLLM runs: the 213 runs of
tests/plan/performance/ by group, and, when given, AIConfigurator's silicon_sample.csv (its `agg` rows: MoE,
FP8 and MXFP4 models) as a development set.

    python benchmarks/plan_performance_accuracy.py [--silicon silicon_sample.csv] [--as-labelled]

Error = kvtool / measured - 1; the table gives the median of the error (signed: below 0, kvtool is faster than
measured), and the median and the 80th percentile of |error|. `--as-labelled`
plans the GPUStack Qwen3-14B / 32B runs on the H100 SXM their source names instead of the H100 PCIe their
decode speed shows (tests/plan/performance/serving_cases.py).
"""

import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "plan" / "performance"))
import serving_cases  # noqa: E402

from kvtool.cli.plan_forecast import planned_setup  # noqa: E402
from kvtool.engine.plan.performance.load import Load  # noqa: E402
from kvtool.engine.plan.performance.predict import predict  # noqa: E402
from kvtool.engine.sizing.engine_args import EngineArgs  # noqa: E402

SILICON_GPUS = {"h100_sxm": "H100-80GB", "h200_sxm": "H200"}
SILICON_MODELS = {  # the checkpoint -> what plan reads for it
    "nvidia/Llama-3.1-8B-Instruct-FP8": ("meta-llama/Llama-3.1-8B-Instruct", "fp8"),
    "openai/gpt-oss-120b": ("openai/gpt-oss-120b", None),
}
CROWD = 512  # gpt-oss rows of 512 clients: TTFT of minutes and TPOT of one small batch, a server that admitted few


def group(item: dict) -> str:
    source = "AIC" if item["id"].startswith("aic") else "GPUStack"
    model = item["model"].split("/")[-1] + (" FP8" if item["quantization"] else "")
    return f"{source} {model} {item['gpu_planned']} {'saturation' if serving_cases.saturated(item) else 'closed loop'}"


def measured_runs(as_labelled: bool) -> dict[str, dict[str, list[float]]]:
    if as_labelled:
        rows = serving_cases.rows()
        for item in rows:
            item["gpu_planned"] = "H100-80GB" if item["gpu_planned"] == "h100-pcie" else item["gpu_planned"]
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for item in serving_cases.rows():
        for comparison in serving_cases.comparisons(item["id"]):
            for name in (group(item), "all"):
                table[name][comparison.figure].append(comparison.error)
    return table


def silicon_runs(path: Path) -> dict[str, dict[str, list[float]]]:
    """The `agg` rows a single tensor-parallel group serves (rows with attention data parallelism are skipped),
    10 requests per client as for the 213."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in csv.DictReader(path.open()):
        if row["mode"] != "agg" or int(row["moe_tp_size"] or 1) * int(row["moe_ep_size"] or 1) > int(row["tp_size"]):
            continue
        clients = int(row["batch_size"])
        metrics = predict(
            _silicon_setup(row),
            int(row["isl"]),
            int(row["osl"]),
            Load(serving_cases.REQUESTS_PER_CLIENT * clients, math.inf, clients),
        )
        crowd = clients >= CROWD
        buckets = [row["model_path"] + (f" ({CROWD} clients)" if crowd else ""), "all"]
        buckets += [] if crowd else [f"all, under {CROWD} clients"]
        for key, figure in (("silicon_ttft_ms", "ttft"), ("silicon_tpot_ms", "tpot")):
            for bucket in buckets:
                table[bucket][figure].append(metrics.metrics[f"mean_{figure}_ms"] / float(row[key]) - 1)
    return table


def _silicon_setup(row: dict):
    model, quantization = SILICON_MODELS.get(row["model_path"], (row["model_path"], None))
    args = EngineArgs(model=model, quantization=quantization, tensor_parallel_size=int(row["tp_size"]))
    return planned_setup(args, SILICON_GPUS[row["system"]], row["backend_version"] or "0.18.0")


def print_table(title: str, table: dict[str, dict[str, list[float]]]) -> None:
    headings = ("runs", "n", *(f"{f} {q}" for f in ("TTFT", "TPOT", "throughput") for q in ("signed", "median", "p80")))
    print(f"\n{title}\n| " + " | ".join(headings) + " |\n" + "|---" * len(headings) + "|")
    for name, figures in sorted(table.items(), key=lambda item: (item[0].startswith("all"), item[0])):
        count = max(len(values) for values in figures.values())
        cells = [_stat(figures.get(f, []), q) for f in ("ttft", "tpot", "output_throughput") for q in (0, 50, 80)]
        print(f"| {name} | {count} | " + " | ".join(cells) + " |")


def _stat(values: list[float], q: int) -> str:
    """q 0: the signed median; else the q-th percentile of |error|."""
    if not values:
        return "-"
    if q == 0:
        return f"{statistics.median(values):+.1%}"
    ordered = sorted(abs(value) for value in values)
    value = statistics.median(ordered) if q == 50 else ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
    return f"{value:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silicon", type=Path, help="AIConfigurator's silicon_sample.csv (a development set)")
    parser.add_argument("--as-labelled", action="store_true", help="GPUStack's Qwen3-14B / 32B on H100 SXM")
    args = parser.parse_args()
    print_table("The 213 runs of tests/plan/performance/", measured_runs(args.as_labelled))
    if args.silicon:
        print_table(f"Development set: {args.silicon.name}", silicon_runs(args.silicon))


if __name__ == "__main__":
    main()
