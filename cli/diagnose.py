"""`kvtool diagnose`: paste or pipe a log; get each failure's cause, numbers and fixes."""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kvtool.errors import ExitCode

PASTE_HINT = (
    "Paste the whole failure: the exception's last lines, the HTTP 400/404 body, or the server log from "
    "start-up to the error (e.g. `kvtool diagnose server.log` or `docker logs vllm 2>&1 | kvtool diagnose`)."
)
PLAN_PANEL = "Plan-based fixes"
LIVE_PANEL = "Live server"


def diagnose(
    log: Annotated[
        Path | None,
        typer.Argument(
            help="Log or error text to read; stdin when omitted or '-'.",
            dir_okay=False,
            allow_dash=True,
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help='Print {"findings": [...]} as JSON.')] = False,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model (catalog name, config.json, folder or .gguf) when the log does not name it.",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            help="GPU from the catalog (H100-80GB, L4, ...), or a local device index.", rich_help_panel=PLAN_PANEL
        ),
    ] = None,
    gpu_mem: Annotated[
        str | None, typer.Option(help="Memory of the GPU, e.g. 23.58GiB or 80GB.", rich_help_panel=PLAN_PANEL)
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            help="Diagnose a running server from its /metrics (base or /metrics URL).", rich_help_panel=LIVE_PANEL
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="KVTOOL_API_KEY", help="Bearer token for --url servers behind one.", rich_help_panel=LIVE_PANEL
        ),
    ] = None,
) -> None:
    """Find memory and length failures in vLLM / PyTorch output and compute the fix.

    Reads start-up logs, tracebacks, client exceptions, HTTP error bodies and /metrics scrapes, any size,
    or a running server's /metrics with --url (preemptions, a KV cache near full).
    Exit status: 0 something diagnosed, 1 nothing recognised, 2 usage error or no metrics at --url.
    """
    from kvtool.engine.diagnosis import diagnose as run_diagnosis
    from kvtool.engine.diagnosis.memory_model import resolve_spec

    spec = resolve_spec(model) if model else None
    if url is not None:
        result = _diagnose_url(url, api_key, spec, log)
    else:
        total_gib = _gpu_gib(gpu, gpu_mem) if gpu or gpu_mem else None
        with _open_input(log) as stream:
            result = run_diagnosis(stream, spec=spec, total_gpu_gib=total_gib)
    if json_output:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _render(result.findings)
    raise typer.Exit(ExitCode.OK if result.findings else ExitCode.NEGATIVE)


def _diagnose_url(url: str, api_key: str | None, spec, log: Path | None):
    """One scrape of /metrics (and /v1/models for max_model_len), explained as diagnose explains a log."""
    from kvtool.engine.diagnosis.live import diagnose_server
    from kvtool.errors import UsageError
    from kvtool.monitor.alerts import server_numbers
    from kvtool.monitor.scrape import Scraper
    from kvtool.monitor.window import snapshot

    if log is not None:
        raise UsageError("give a log or --url, not both.", fix="Drop one of them.")
    with Scraper(url, api_key) as scraper:
        view = snapshot(scraper.url, [scraper.reading()])
        return diagnose_server(server_numbers(view, scraper.max_model_len()), spec)


def _open_input(log: Path | None):
    if log is None or str(log) == "-":
        stdin = sys.stdin.buffer
        if stdin.isatty():
            Console(stderr=True).print("Paste the log, then press Ctrl-D.", style="dim")
        return stdin
    from kvtool.errors import UsageError

    try:
        return open(log, "rb")
    except OSError as err:
        raise UsageError(f"cannot read {log}: {err.strerror}.", "Check the path and its permissions.") from None


def _gpu_gib(gpu: str | None, gpu_mem: str | None) -> float:
    from kvtool.engine.discovery.gpus import resolve_gpus
    from kvtool.engine.sizing.units import GiB

    return round(resolve_gpus(gpu, gpu_mem, None)[0].total_bytes / GiB, 2)


def _render(findings) -> None:
    console = Console()
    if not findings:
        console.print("[bold]No memory or length failure recognised.[/]")
        console.print(PASTE_HINT, highlight=False)
        return
    for finding in findings:
        console.print(_panel(finding))


def _panel(finding) -> Panel:
    parts = [Text(finding.summary, style="bold"), _evidence(finding)]
    if finding.numbers:
        parts.append(_numbers(finding.numbers))
    if finding.fixes:
        parts.append(_fixes(finding.fixes))
    for alternative in finding.alternatives:
        parts.append(Text.assemble(("Or ", "bold"), (alternative.category, "bold magenta"), f": {alternative.why}"))
        if alternative.fixes:
            parts.append(_fixes(alternative.fixes, "Its fixes"))
    parts += [Text(note, style="dim") for note in finding.notes]
    title = f"[bold]{finding.category}[/] [dim]({finding.stage})[/]"
    return Panel(
        Group(*parts), title=title, title_align="left", border_style="red" if finding.stage != "runtime" else "yellow"
    )


def _evidence(finding) -> Text:
    text = Text("▌ ", style="dim")
    line = Text(finding.evidence, style="dim")
    start, end = finding.span
    if end > start:
        line.stylize("bold yellow", start, end)
    return text + line


def _numbers(numbers: dict) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="cyan")
    table.add_column(justify="right")
    for name, value in numbers.items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) else f"{value:g}")
    return table


def _fixes(fixes, title: str = "Fixes, in order") -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 1))
    for index, fix in enumerate(fixes, 1):
        knob = fix.flag or fix.param or ""
        bare = fix.value is None or fix.value is True  # a switch such as --enforce-eager
        value = "" if bare else (f" {fix.value}" if fix.flag else f" = {fix.value}")
        table.add_row(f"{index}.", Text(knob + value, style="bold green"), fix.action)
    return table
