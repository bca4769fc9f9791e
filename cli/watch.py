"""`kvtool watch URL`: a live view of a vLLM or kvtool server's /metrics, with the checklist's alerts."""

import json
import time
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kvtool.errors import ExitCode

SERVER, VIEW, ALERTS = "Server", "View", "Alerts"


def watch(
    url: Annotated[
        str, typer.Argument(help="The server's base URL or its /metrics URL.", metavar="URL", show_default=False)
    ],
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between scrapes.", rich_help_panel=VIEW)] = 2.0,
    window: Annotated[
        float,
        typer.Option(min=1.0, help="Seconds of history behind rates, peaks and percentiles.", rich_help_panel=VIEW),
    ] = 60.0,
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="Scrape twice, --interval apart, print one snapshot and exit.", rich_help_panel=VIEW
        ),
    ] = False,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the snapshot and its alerts as JSON (implies --once).", rich_help_panel=VIEW
        ),
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="KVTOOL_API_KEY", help="Bearer token for servers behind one.", rich_help_panel=SERVER),
    ] = None,
    ttft_p99: Annotated[
        float, typer.Option(min=0.0, help="p99 TTFT objective in seconds (alert above it).", rich_help_panel=ALERTS)
    ] = 2.0,
) -> None:
    """Watch KV-cache usage, queues, preemptions, throughput and latency of a running server.

    [dim]Reads vLLM's metric names, V0 and V1. Exit status: 0 done (Ctrl-C stops the live view), 2 no
    vLLM metrics at URL.[/dim]
    """
    from kvtool.monitor.scrape import Scraper
    from kvtool.monitor.watcher import Watcher

    with Scraper(url, api_key) as scraper:
        watcher = Watcher(scraper, window, ttft_p99)
        if once or json_output:
            view = watcher.once(interval)
            if json_output:
                print(json.dumps(watcher.to_dict(view), indent=2))
            else:
                Console().print(render(view, watcher.alerts(view)))
            raise typer.Exit(ExitCode.OK)
        _live(watcher, interval)


def _live(watcher, interval: float) -> None:
    view = watcher.step()
    try:
        with Live(render(view, watcher.alerts(view)), auto_refresh=False, screen=False) as live:
            while True:
                time.sleep(interval)
                view = watcher.step()
                live.update(render(view, watcher.alerts(view)), refresh=True)
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.OK) from None


def render(view, alerts) -> Group:
    models = ", ".join(view.model_names) or "?"
    engines = f"{view.num_engines} engine{'s' * (view.num_engines != 1)}"
    title = Text.assemble(
        ("kvtool watch ", "bold"),
        view.url,
        "  ",
        (models, "cyan"),
        f" · {engines} · {view.vllm_version.upper()} names · window {view.window_s:.1f} s",
        style="",
    )
    return Group(title, _gauges(view), _alerts_table(alerts))


def _gauges(view) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    usage = view.kv_cache_usage
    bar = ProgressBar(
        total=1.0, completed=usage or 0.0, width=30, complete_style="red" if (usage or 0) >= 0.9 else "green"
    )
    usage_row = Table.grid(padding=(0, 1))
    usage_row.add_row(bar, f"{_pct(usage)} now, peak {_pct(view.kv_cache_usage_peak)}")
    table.add_row("KV cache", usage_row)
    if view.cpu_cache_usage is not None:
        table.add_row("CPU swap space", _pct(view.cpu_cache_usage))
    requests = f"running {_n(view.num_requests_running)}  waiting {_n(view.num_requests_waiting)}"
    if view.num_requests_swapped is not None:
        requests += f"  swapped {_n(view.num_requests_swapped)}"
    table.add_row("Requests", requests)
    table.add_row(
        "Preemptions",
        f"{_n(view.preemptions_in_window)} in the window ({_rate(view.preemptions_per_s)}/s), "
        f"{_n(view.num_preemptions_total)} since start",
    )
    table.add_row(
        "Tokens/s", f"prompt {_rate(view.prompt_tokens_per_s)}  generation {_rate(view.generation_tokens_per_s)}"
    )
    table.add_row("TTFT", f"p50 {_ms(view.ttft_p50_s)}  p99 {_ms(view.ttft_p99_s)}")
    table.add_row("Inter-token", f"p50 {_ms(view.itl_p50_s)}  p99 {_ms(view.itl_p99_s)}")
    table.add_row("Prefix-cache hits", _pct(view.prefix_cache_hit_rate))
    return table


def _alerts_table(alerts) -> Table | Text:
    if not alerts:
        return Text("No alerts.", style="green")
    table = Table(title="Alerts", title_justify="left", show_header=False, box=None, padding=(0, 1))
    shown = set()
    for alert in alerts:
        style = "bold red" if alert.severity == "critical" else "bold yellow"
        table.add_row(
            Text(alert.severity.upper(), style=style),
            Text(alert.name, style="bold"),
            f"{alert.summary} (value {alert.value:g})",
        )
        table.add_row("", "", Text("fix: as above" if alert.fix in shown else f"fix: {alert.fix}", style="green"))
        shown.add(alert.fix)
    return table


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _n(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:,.0f} ms"
