"""`kvtool plan --workload`'s served-performance options (the forecast itself: cli/plan_forecast.py, imported
only when a workload asks for one)."""

from dataclasses import dataclass
from typing import Annotated

import typer

from kvtool.cli.engine_options import COUNT
from kvtool.engine.plan.performance.load import DEFAULT_NUM_PROMPTS
from kvtool.errors import UsageError

PERFORMANCE = "Served performance (with --workload)"

MaxConcurrency = Annotated[
    str | None,
    typer.Option(
        help="Clients of a closed loop, or a list: 1,8,32 (vllm bench serve's --max-concurrency).",
        rich_help_panel=PERFORMANCE,
    ),
]
RequestRate = Annotated[
    str | None,
    typer.Option(
        help="Poisson requests per second, a list, or inf: all at once \\[default: inf].", rich_help_panel=PERFORMANCE
    ),
]
NumPrompts = Annotated[
    int | None,
    typer.Option(
        click_type=COUNT, help=f"Requests per run \\[default: {DEFAULT_NUM_PROMPTS}].", rich_help_panel=PERFORMANCE
    ),
]
LengthsOption = Annotated[
    str | None,
    typer.Option(
        help="How lengths spread about IN:OUT: fixed (vllm bench serve's random dataset), uniform:R (its "
        "--random-range-ratio) or exponential (a chat dataset such as ShareGPT) \\[default: fixed].",
        rich_help_panel=PERFORMANCE,
    ),
]
SloOption = Annotated[
    str | None,
    typer.Option(
        help="Targets, e.g. ttft_p99=2s,tpot_mean=50ms: adds the most clients and the highest rate that meet them.",
        rich_help_panel=PERFORMANCE,
    ),
]
GpuBandwidth = Annotated[
    float | None,
    typer.Option(
        min=1.0, help="The GPU's memory bandwidth in GB/s, where the catalog has none.", rich_help_panel=PERFORMANCE
    ),
]
GpuTflops = Annotated[
    str | None,
    typer.Option(
        help="The GPU's dense tensor-core TFLOP/s, where the catalog has none: 312, or bf16=312,fp8=624.",
        rich_help_panel=PERFORMANCE,
    ),
]


@dataclass(frozen=True)
class PerformanceOptions:
    max_concurrency: str | None = None
    request_rate: str | None = None
    num_prompts: int | None = None
    lengths: str | None = None
    slo: str | None = None
    gpu_bandwidth: float | None = None
    gpu_tflops: str | None = None

    @property
    def given(self) -> list[str]:
        names = ("max_concurrency", "request_rate", "num_prompts", "lengths", "slo", "gpu_bandwidth", "gpu_tflops")
        return ["--" + name.replace("_", "-") for name in names if getattr(self, name) is not None]


def check_wanted(options: PerformanceOptions, workloads: list[str] | None) -> None:
    """The load options ask for a forecast, which needs the request shape."""
    if options.given and not workloads:
        raise UsageError(f"{options.given[0]} needs --workload IN:OUT.", "Add e.g. --workload 1024:512.")
