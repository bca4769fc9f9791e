"""Rich tables of a served-performance forecast (`kvtool plan --workload`) and of a forecast beside what
`kvtool bench` measured (`kvtool bench --predict`)."""

from rich import box
from rich.table import Table
from rich.text import Text

from kvtool.engine.plan.performance.accuracy import BANDS

COLUMNS = (  # heading, `vllm bench serve` key, band, digits
    ("TTFT", "mean_ttft_ms", "ttft", 0),
    ("TTFT p99", "p99_ttft_ms", "ttft", 0),
    ("TPOT", "mean_tpot_ms", "tpot", 1),
    ("ITL p99", "p99_itl_ms", "itl", 1),
    ("E2E", "mean_e2el_ms", "e2el", 0),
    ("req/s", "request_throughput", "throughput", 2),
    ("tok/s", "output_throughput", "throughput", 0),
)
TABLE_WIDTH = 112  # the forecast's columns side by side, whatever the terminal's width
COMPARED = (
    *COLUMNS[:3],
    ("TPOT p99", "p99_tpot_ms", "tpot", 1),
    ("ITL", "mean_itl_ms", "itl", 1),
    *COLUMNS[3:],
    ("tok/s total", "total_token_throughput", "throughput", 0),
)


def forecast_table(result) -> Table:
    """One row per workload and load: means unless marked, latencies in ms; the bands in the caption."""
    table = Table(
        title="Served performance (forecast; vllm bench serve's metrics, ms)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        caption=f"band: TTFT ±{BANDS['ttft']:.0%}, TPOT and ITL ±{BANDS['tpot']:.0%}, E2E ±{BANDS['e2el']:.0%}, "
        f"throughput ±{BANDS['throughput']:.0%}",
        caption_justify="left",
    )
    several = len({workload for workload, _ in result.runs}) > 1
    for heading in (("workload",) if several else ()) + ("load", *(c[0] for c in COLUMNS), "bound"):
        text = heading in ("workload", "load", "bound")
        table.add_column(heading, justify="left" if text else "right", no_wrap=True)
    for workload, run in result.runs:
        cells = [f"{run.metrics[key]:,.{digits}f}" for _, key, _, digits in COLUMNS]
        table.add_row(*((workload.name,) if several else ()), run.load.label, *cells, run.bound)
    return table


def print_forecast(console, result) -> None:
    """The table at its natural width (wider than a narrow terminal rather than cut), the SLO's answers and
    the line on what no measurement has checked."""
    narrow = console.width
    console.width = max(narrow, TABLE_WIDTH)
    try:
        console.print(forecast_table(result))
    finally:
        console.width = narrow
    for line in [*slo_lines(result), *([result.note] if result.note else [])]:
        console.print(line, soft_wrap=True)


def slo_lines(result) -> list[Text]:
    lines = []
    for answer in result.slo:
        targets = ", ".join(f"{key.removesuffix('_ms')} <= {limit:g} ms" for key, limit in answer.slo.limits_ms.items())
        lines.append(
            Text.assemble(
                (f"SLO {targets} for {answer.workload.name}: ", "bold"),
                f"at most {answer.max_concurrency} concurrent clients, or {answer.max_request_rate:.2f} requests/s",
            )
        )
    return lines


def comparison_table(predicted: dict[str, float], measured: dict[str, float]) -> Table:
    """kvtool plan's figure beside the measured one, and their ratio: the model's error on this hardware."""
    table = Table(title="Predicted (kvtool plan) against measured", title_justify="left")
    for heading in ("metric", "predicted", "measured", "error", "band"):
        table.add_column(heading, justify="left" if heading == "metric" else "right")
    for heading, key, band, digits in COMPARED:
        error = predicted[key] / measured[key] - 1 if measured.get(key) else None
        style = "red" if error is not None and abs(error) > BANDS[band] else ""
        table.add_row(
            heading,
            f"{predicted[key]:,.{digits}f}",
            f"{measured.get(key, 0):,.{digits}f}",
            Text(f"{error:+.0%}" if error is not None else "-", style=style),
            f"±{BANDS[band]:.0%}",
        )
    return table
