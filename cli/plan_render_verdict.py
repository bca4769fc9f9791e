"""The closing lines of a `kvtool plan` table: the KV cache's range, whether the plan fits and how sure it is,
what vLLM would log, the commands to start with and the warnings."""

from rich.console import Console

from kvtool.engine.sizing.units import GiB


def range_line(report) -> str:
    band = report.kv_range
    low, high = band.bytes
    return (
        f"[dim]range, each estimate at its band's ends:[/] KV cache {low / GiB:.2f} - {high / GiB:.2f} GiB, "
        f"{band.tokens[0]:,} - {band.tokens[1]:,} tokens, max concurrency {band.max_concurrency[0]:.2f}x - "
        f"{band.max_concurrency[1]:.2f}x, safe max_model_len {band.safe_max_model_len[0]:,} - "
        f"{band.safe_max_model_len[1]:,}"
    )


def _margin_words(report) -> str:
    margin = report.fits_margin
    if margin.check not in ("one_request", "weights", "free_memory"):
        return ""
    side = "to spare" if margin.bytes >= 0 else "short"
    sure = "sure" if margin.sure else f"{margin.likelihood:.0%} of the range agrees"
    return f"; {abs(margin.bytes) / GiB:.2f} GiB {side} at its '{margin.check.replace('_', ' ')}' check ({sure})"


def print_verdict(console: Console, report) -> None:
    kv, advice = report.kv, report.recommendations
    if report.fits:
        console.print(
            f"[bold green]fits[/]: max_model_len {kv.max_model_len:,} starts; "
            f"safe max_model_len {kv.safe_max_model_len:,}{_margin_words(report)}",
            soft_wrap=True,
        )
    else:
        console.print(
            f"[bold red]does not fit[/]: max_model_len {kv.max_model_len:,}; "
            f"safe max_model_len {kv.safe_max_model_len:,}{_margin_words(report)}",
            soft_wrap=True,
        )
    failed = report.failed_check
    if failed is not None:
        console.print(f"[red]vLLM {report.release.name} stops at its '{failed.name.replace('_', ' ')}' check[/]")
    sized = failed is None or failed.name == "one_request"  # the figures are logged once the cache is sized
    for line in (report.log_lines if _device(report) == "GPU" else [kv.log_line(_device(report))]) * sized:
        console.print(f"[dim]vLLM would log:[/] {line}", soft_wrap=True)
    if advice["vllm_serve"] is None:
        console.print(f"[bold]no command[/]: {advice['no_command_reason']}", soft_wrap=True)
    else:
        console.print(f"[bold]vllm serve[/]   {advice['vllm_serve']}", soft_wrap=True)
        console.print(f"[bold]kvtool serve[/] {advice['kvtool_serve']}", soft_wrap=True)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)


def _device(report) -> str:
    return "CPU" if report.request.gpus[0].source == "kv-cache-memory" else "GPU"
