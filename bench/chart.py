"""The sweep chart: output throughput, tail TTFT / TPOT and preemptions against the swept value (needs matplotlib)."""

from pathlib import Path

from kvtool.errors import UsageError


def panels(percentile: float, with_server: bool) -> list[tuple[str, str]]:
    p = f"p{percentile:g}"
    chosen = [
        ("output_throughput", "output tokens/s"),
        (f"{p}_ttft_ms", f"{p} TTFT (ms)"),
        (f"{p}_tpot_ms", f"{p} TPOT (ms)"),
    ]
    return chosen + [("server_preemptions", "preemptions (server)")] if with_server else chosen


def plot_sweep(
    parameter: str, values: tuple[float, ...], rows: list[dict], path: Path, percentile: float = 99.0, title: str = ""
) -> Path:
    """`rows`: one summary row per point (export.summary_row), server_* keys when /metrics was read."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--chart needs matplotlib.", fix="pip install 'kvtool[chart]'") from None
    chosen = panels(percentile, all("server_preemptions" in row for row in rows))
    labels = [f"{v:g}" for v in values]
    figure, axes = plt.subplots(1, len(chosen), figsize=(3.6 * len(chosen), 3.2), layout="constrained")
    for axis, (key, label) in zip(axes, chosen):
        ys = [row.get(key) or 0.0 for row in rows]
        axis.plot(labels, ys, marker="o")
        axis.set_ylim(0, max(ys) * 1.1 or 1)
        axis.set_xlabel(parameter)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    figure.suptitle(title or f"kvtool bench: sweep over {parameter}")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
