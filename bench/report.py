"""Rich renderables for a run: the live line, the result tables, the sweep table."""

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from kvtool.bench.runner import BenchResult, RunProgress

# Above this prefix-cache hit rate the report warns that the run measured cache hits.
HIGH_PREFIX_HIT_RATE = 0.5
LATENCY_ROWS = (
    ("ttft", "TTFT", "send -> first token"),
    ("tpot", "TPOT", "per output token after the first"),
    ("itl", "ITL", "gap between tokens, per token"),
    ("e2el", "E2E latency", "send -> last token"),
)


def live_line(progress: RunProgress, label: str = "") -> Text:
    line = Text()
    if label:
        line.append(f"{label}  ", style="bold")
    line.append(f"done {progress.done}/{progress.total}")
    line.append(f"  in flight {progress.in_flight}")
    line.append(f"  failed {progress.failed}", style="red" if progress.failed else "")
    line.append(f"  {progress.output_throughput():.1f} output tok/s now", style="cyan")
    return line


def result_tables(result: BenchResult) -> Group:
    parts = [_totals_table(result), _latency_table(result)]
    if result.server is not None:
        parts.append(_server_table(result.server))
        if (warning := prefix_cache_warning(result.server)) is not None:
            parts.append(Text(warning, style="bold yellow"))
    if result.summary["failures"]:
        parts.append(_failures_table(result.summary["failures"]))
    return Group(*parts)


def _totals_table(result: BenchResult) -> Table:
    s = result.summary
    table = Table(
        title=f"kvtool bench: {result.model} at {result.config.base_url}", show_header=False, title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("Successful / failed requests", f"{s['completed']} / {s['failed']}")
    table.add_row("Duration (s)", f"{s['duration']:.2f}")
    table.add_row("Data seed", str(result.config.seed))
    table.add_row("Input / output tokens (server usage)", f"{s['total_input_tokens']} / {s['total_output_tokens']}")
    table.add_row("Request throughput (req/s)", f"{s['request_throughput']:.2f}")
    if "request_goodput" in s:
        table.add_row("Request goodput (req/s)", f"{s['request_goodput']:.2f} ({s['slo_attainment']:.0%} within SLO)")
    table.add_row("Output token throughput (tok/s)", f"{s['output_throughput']:.1f}")
    table.add_row("Total token throughput (tok/s)", f"{s['total_token_throughput']:.1f}")
    return table


def _latency_table(result: BenchResult) -> Table:
    percentiles = result.config.percentiles
    table = Table(title="Latency (ms)", title_justify="left")
    table.add_column("metric", style="bold")
    for heading in ["mean", *(f"p{q:g}" for q in percentiles), "max"]:
        table.add_column(heading, justify="right")
    table.add_column("definition", style="dim")
    for key, name, definition in LATENCY_ROWS:
        values = [result.summary[f"{stat}_{key}_ms"] for stat in ["mean", *(f"p{q:g}" for q in percentiles), "max"]]
        table.add_row(name, *(f"{v:.1f}" for v in values), definition)
    return table


def _server_table(server: dict) -> Table:
    table = Table(title="Server view (/metrics)", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("Preemptions during the run", str(server["preemptions"]))
    table.add_row("Peak KV-cache usage", _percent(server["peak_kv_cache_usage"]))
    table.add_row("Peak waiting requests", _number(server["peak_num_requests_waiting"]))
    table.add_row("Peak running requests", _number(server["peak_num_requests_running"]))
    table.add_row("Prefix-cache hit rate", _percent(server["prefix_cache_hit_rate"]))
    return table


def prefix_cache_warning(server: dict) -> str | None:
    """A warning when the prefix cache served much of the run's prompts: latency and throughput then
    measure cache hits, not the prefill fresh traffic needs."""
    rate = server.get("prefix_cache_hit_rate")
    if rate is None or rate < HIGH_PREFIX_HIT_RATE:
        return None
    return (
        f"Warning: the server's prefix cache answered {rate:.0%} of prompt tokens during the run: prompts repeated "
        "(a --seed used before, a shared --prefix-len, or a dataset with common prefixes), so TTFT and throughput "
        "are better than fresh traffic would get. Drop --seed for fresh prompts."
    )


def _failures_table(failures: dict[str, int]) -> Table:
    table = Table(title="Failures", title_justify="left")
    table.add_column("count", justify="right", style="red")
    table.add_column("reason")
    for reason, count in failures.items():
        table.add_row(str(count), reason)
    return table


def sweep_table(
    parameter: str, values: tuple[float, ...], results: list[BenchResult], percentile: float = 99.0
) -> Table:
    p = f"p{percentile:g}"
    table = Table(
        title=f"Sweep over {parameter}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        show_edge=False,
        caption="latencies in ms; the last three columns from /metrics",
        caption_justify="left",
    )
    headings = [
        parameter.replace("-", "-\n", 1),
        "ok/\nfailed",
        "req/s",
        "out\ntok/s",
        f"{p}\nTTFT",
        f"{p}\nTPOT",
        f"{p}\nITL",
        "pre-\nempted",
        "KV\npeak",
        "peak\nwaiting",
    ]
    for heading in headings:
        table.add_column(heading, justify="right")
    for value, result in zip(values, results):
        s, server = result.summary, result.server or {}
        table.add_row(
            f"{value:g}",
            f"{s['completed']}/{s['failed']}",
            f"{s['request_throughput']:.2f}",
            f"{s['output_throughput']:.1f}",
            f"{s[f'{p}_ttft_ms']:.0f}",
            f"{s[f'{p}_tpot_ms']:.1f}",
            f"{s[f'{p}_itl_ms']:.1f}",
            _number(server.get("preemptions")),
            _percent(server.get("peak_kv_cache_usage")),
            _number(server.get("peak_num_requests_waiting")),
        )
    return table


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"
