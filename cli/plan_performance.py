"""`kvtool plan --workload`'s served-performance options as given (their flags: cli/plan_options.py; the forecast
itself: cli/plan_forecast.py, imported only when a workload asks for one)."""

from dataclasses import dataclass

from kvtool.errors import UsageError


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
