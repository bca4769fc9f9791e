"""The sweep chart: output throughput and tail TTFT / TPOT against the swept value (needs matplotlib)."""

from pathlib import Path

from kvtool.errors import UsageError



def panels(percentile: float) -> list[tuple[str, str]]:
    p = f"p{percentile:g}"
    return [("output_throughput", "output tokens/s"), (f"{p}_ttft_ms", f"{p} TTFT (ms)"), (f"{p}_tpot_ms", f"{p} TPOT (ms)")]


def plot_sweep(
    parameter: str, values: tuple[float, ...], summaries: list[dict], path: Path, percentile: float = 99.0, title: str = ""
) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--chart needs matplotlib.", fix="pip install 'kvtool[chart]'") from None
    labels = [f"{v:g}" for v in values]
    figure, axes = plt.subplots(1, 3, figsize=(12, 3.4), layout="constrained")
    for axis, (key, label) in zip(axes, panels(percentile)):
        axis.plot(labels, [s.get(key, 0.0) for s in summaries], marker="o")
        axis.set_xlabel(parameter)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    figure.suptitle(title or f"kvtool bench: sweep over {parameter}")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
