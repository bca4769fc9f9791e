"""`kvtool bench`: load an OpenAI-compatible server (or the engine offline) and report what operators measure."""

import asyncio
import math
import secrets
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live

from kvtool.cli.engine_options import BYTE_SIZE, LENGTH
from kvtool.engine.server.defaults import DEFAULT_URL

SERVER, WORKLOAD, SAMPLING, LOAD, METRICS, OUTPUT, OFFLINE = (
    "Server",
    "Workload",
    "Sampling",
    "Load",
    "Metrics",
    "Output",
    "Offline",
)


class Endpoint(str, Enum):
    completions = "completions"
    chat = "chat"


class Baseline(str, Enum):
    hf = "hf"


def bench(  # noqa: PLR0913 (a Typer command: one parameter per option)
    url: Annotated[
        str, typer.Option(help="Base URL of the OpenAI-compatible server.", rich_help_panel=SERVER)
    ] = DEFAULT_URL,
    endpoint: Annotated[
        Endpoint, typer.Option(help="/v1/completions or /v1/chat/completions.", rich_help_panel=SERVER)
    ] = Endpoint.completions,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model to ask for (default: the first in /v1/models; offline: smollm2).", rich_help_panel=SERVER
        ),
    ] = None,
    dataset: Annotated[
        str, typer.Option(help="'random', a ShareGPT .json file or a .jsonl of prompts.", rich_help_panel=WORKLOAD)
    ] = "random",
    num_prompts: Annotated[
        int, typer.Option("--num-prompts", "-n", min=1, help="Requests to send.", rich_help_panel=WORKLOAD)
    ] = 100,
    input_len: Annotated[
        int,
        typer.Option(min=1, help="Random prompts: words (~tokens) after the shared prefix.", rich_help_panel=WORKLOAD),
    ] = 256,
    output_len: Annotated[
        int,
        typer.Option(min=1, help="Random prompts and .jsonl lines without one: max_tokens.", rich_help_panel=WORKLOAD),
    ] = 128,
    range_ratio: Annotated[
        float,
        typer.Option(
            help="Random lengths vary uniformly within ±r of --input-len and --output-len.", rich_help_panel=WORKLOAD
        ),
    ] = 0.0,
    prefix_len: Annotated[
        int,
        typer.Option(
            min=0, help="Random prompts: a prefix of this many words shared by all.", rich_help_panel=WORKLOAD
        ),
    ] = 0,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="max_tokens for every request (overrides the dataset).", rich_help_panel=WORKLOAD),
    ] = None,
    ignore_eos: Annotated[
        bool, typer.Option(help="Generate max_tokens tokens even past end-of-sequence.", rich_help_panel=WORKLOAD)
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed for prompts and arrival times (default: a fresh one per run, printed).",
            rich_help_panel=WORKLOAD,
            show_default=False,
        ),
    ] = None,
    temperature: Annotated[
        float,
        typer.Option(
            min=0.0, help="Sent with every request; 0 is greedy, as vllm bench serve sends.", rich_help_panel=SAMPLING
        ),
    ] = 0.0,
    top_p: Annotated[
        float | None,
        typer.Option(help="Sent with every request when given.", rich_help_panel=SAMPLING, show_default=False),
    ] = None,
    top_k: Annotated[
        int | None,
        typer.Option(help="Sent with every request when given.", rich_help_panel=SAMPLING, show_default=False),
    ] = None,
    extra_body: Annotated[
        str | None,
        typer.Option(
            help="JSON object merged into every request, e.g. '{\"min_p\": 0.1}'.",
            rich_help_panel=SAMPLING,
            show_default=False,
        ),
    ] = None,
    request_rate: Annotated[
        float, typer.Option(help="Requests per second, or inf to send all at once.", rich_help_panel=LOAD)
    ] = math.inf,
    burstiness: Annotated[
        float, typer.Option(help="Gamma shape of arrivals: 1 = Poisson, < 1 burstier.", rich_help_panel=LOAD)
    ] = 1.0,
    max_concurrency: Annotated[
        int | None, typer.Option(min=1, help="At most this many requests in flight.", rich_help_panel=LOAD)
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(min=0.0, help="Stop sending new requests after this many seconds.", rich_help_panel=LOAD),
    ] = None,
    warmups: Annotated[
        int, typer.Option(min=0, help="Requests sent one by one before measuring.", rich_help_panel=LOAD)
    ] = 0,
    request_timeout: Annotated[
        float,
        typer.Option(
            min=1.0, help="Seconds a request may wait for its next chunk before it fails.", rich_help_panel=LOAD
        ),
    ] = 600.0,
    sweep: Annotated[
        str | None,
        typer.Option(
            help="One run per value: max-concurrency=1,8,32 | request-rate=1,4,inf | max-tokens=256,1024.",
            rich_help_panel=LOAD,
        ),
    ] = None,
    percentiles: Annotated[str, typer.Option(help="Percentiles to report.", rich_help_panel=METRICS)] = "50,90,99",
    slo: Annotated[
        str | None, typer.Option(help="Goodput SLOs, e.g. ttft=500ms,tpot=50ms (also e2el).", rich_help_panel=METRICS)
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the summary and per-request records here.", rich_help_panel=OUTPUT),
    ] = None,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Write one summary row per run here.", rich_help_panel=OUTPUT)
    ] = None,
    chart: Annotated[
        Path | None, typer.Option(help="Sweeps: write a PNG chart here (needs matplotlib).", rich_help_panel=OUTPUT)
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(help="Run the embedded engine in this process instead of over HTTP.", rich_help_panel=OFFLINE),
    ] = False,
    vs: Annotated[
        Baseline | None,
        typer.Option(help="Offline: also run the workload through HF transformers generate.", rich_help_panel=OFFLINE),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Offline: the engine's dtype, as kvtool serve --dtype.", rich_help_panel=OFFLINE)
    ] = None,
    quantization: Annotated[
        str | None,
        typer.Option(
            help="Offline: the engine's quantization, as kvtool serve --quantization.", rich_help_panel=OFFLINE
        ),
    ] = None,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            click_type=LENGTH,
            help="Offline: the engine's longest prompt + output, as kvtool serve --max-model-len.",
            rich_help_panel=OFFLINE,
        ),
    ] = None,
    kv_cache_memory: Annotated[
        int | None,
        typer.Option(
            click_type=BYTE_SIZE,
            help="Offline: the engine's KV-cache size, as kvtool serve --kv-cache-memory.",
            rich_help_panel=OFFLINE,
        ),
    ] = None,
) -> None:
    """Benchmark a server: TTFT, TPOT, ITL, E2E latency, throughput and goodput, vLLM's definitions.

    [dim]Token counts come from the server's usage. Works against kvtool serve, vLLM and other
    OpenAI-compatible servers.[/dim]
    """
    from kvtool.bench.datasets import load_dataset
    from kvtool.bench.metrics import parse_percentiles, parse_slo
    from kvtool.bench.runner import BenchConfig
    from kvtool.bench.sampling import sampling_fields
    from kvtool.errors import UsageError

    if request_rate <= 0 or burstiness <= 0:
        raise UsageError("--request-rate and --burstiness must be > 0.")
    if (offline or vs) and (sweep or csv_path):
        raise UsageError(
            "--sweep and --csv work against a server, not with --offline.", fix="Drop them, or drop --offline."
        )
    if chart and not sweep:
        raise UsageError("--chart plots a sweep.", fix="Add e.g. --sweep max-concurrency=1,8,32.")
    engine_args = {
        "dtype": dtype,
        "quantization": quantization,
        "max_model_len": max_model_len,
        "kv_cache_memory": kv_cache_memory,
    }
    engine_args = {name: value for name, value in engine_args.items() if value is not None}
    if not (offline or vs) and engine_args:
        raise UsageError(
            "--dtype, --quantization, --max-model-len and --kv-cache-memory set the embedded engine offline; "
            "a server keeps its own.",
            fix="Add --offline, or set them on the server.",
        )
    if (offline or vs) and extra_body:
        raise UsageError(
            "--extra-body is sent to a server, not to the engine offline.", fix="Drop it, or drop --offline."
        )
    seed = (
        secrets.randbelow(2**31) if seed is None else seed
    )  # fresh prompts, so no run finds the last one's in the prefix cache
    config = BenchConfig(
        dataset=load_dataset(
            dataset,
            input_len=input_len,
            output_len=output_len,
            range_ratio=range_ratio,
            prefix_len=prefix_len,
            seed=seed,
        ),
        base_url=url,
        endpoint=endpoint.value,
        model=model,
        num_prompts=num_prompts,
        request_rate=request_rate,
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        duration_s=duration,
        warmups=warmups,
        max_tokens=max_tokens,
        ignore_eos=ignore_eos,
        seed=seed,
        slo=parse_slo(slo) if slo else None,
        percentiles=parse_percentiles(percentiles),
        request_timeout_s=request_timeout,
        sampling=sampling_fields(temperature, top_p, top_k, extra_body),
        engine_args=engine_args,
    )
    if offline or vs:
        _bench_offline(config, vs is not None, json_path)
    else:
        _bench_server(config, sweep, json_path, csv_path, chart)


def _bench_server(
    config, sweep_text: str | None, json_path: Path | None, csv_path: Path | None, chart: Path | None
) -> None:
    from kvtool.bench.report import result_tables, sweep_table
    from kvtool.bench.sweep import parse_sweep, single_run

    sweep = parse_sweep(sweep_text) if sweep_text else single_run()
    results = [_run_live(c, label) for c, label in zip(sweep.configs(config), sweep.labels())]
    console = Console()
    for result, label in zip(results, sweep.labels()):
        if label:
            console.rule(label)
        console.print(result_tables(result))
    if sweep.parameter:
        console.print(sweep_table(sweep.parameter, sweep.values, results, max(config.percentiles)))
    _write_files(console, sweep, results, json_path, csv_path, chart)


def _write_files(
    console: Console, sweep, results, json_path: Path | None, csv_path: Path | None, chart: Path | None
) -> None:
    from kvtool.bench import export

    if json_path:
        export.write_json(json_path, export.runs_dict(sweep, results))
        console.print(f"results: {json_path}")
    if csv_path:
        export.write_csv(csv_path, export.summary_rows(sweep, results))
        console.print(f"summary rows: {csv_path}")
    if chart and sweep.parameter:
        from kvtool.bench.chart import plot_sweep

        percentile = max(results[0].config.percentiles)
        plot_sweep(sweep.parameter, sweep.values, export.summary_rows(sweep, results), chart, percentile)
        console.print(f"chart: {chart}")


def _run_live(config, label: str):
    from kvtool.bench.report import live_line
    from kvtool.bench.runner import RunProgress, run_benchmark

    progress = RunProgress(total=config.num_prompts)
    stderr = Console(stderr=True)
    with Live(get_renderable=lambda: live_line(progress, label), console=stderr, transient=True, refresh_per_second=4):
        return asyncio.run(run_benchmark(config, progress))


def _bench_offline(config, vs_hf: bool, json_path: Path | None) -> None:
    from kvtool.bench import export
    from kvtool.bench.offline import offline_table, run_offline

    result = run_offline(config, vs_hf=vs_hf)
    Console().print(offline_table(result))
    if json_path:
        export.write_json(json_path, result)
