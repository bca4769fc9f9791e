"""Rich rendering of a `kvtool plan` report."""

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvtool.cli import plan_render_verdict as verdict
from kvtool.engine.sizing.units import GiB

console = Console(highlight=False)
BAR_WIDTH = 30
PARTS = {
    "total_bytes": "GPU memory",
    "weights_bytes": "weights",
    "activation_bytes": "activation peak",
    "non_torch_bytes": "non-torch",
    "cudagraph_bytes": "CUDA graphs",
    "encoder_bytes": "encoder profile",
    "other_process_bytes": "other processes",
    "kv_headroom_bytes": "KV headroom (0.34)",
    "kv_cache_bytes": "KV cache",
}
COMPUTED = ("weights_bytes", "other_process_bytes")  # the parts a plan without a log does not estimate


def gib(num_bytes: float) -> str:
    return f"{num_bytes / GiB:.2f} GiB"


def human_bytes(num_bytes: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if num_bytes >= size:
            return f"{num_bytes / size:,.1f} {unit}"
    return f"{num_bytes:,} B"


def print_report(report) -> None:
    console.print(_title(report))
    if report.from_log is not None:
        for line in _from_log().from_log_lines(report.from_log, PARTS):
            console.print(line, soft_wrap=True)
    console.print(_model_table(report))
    if _kv_budget_given(report):
        console.print(f"KV cache budget given outright: {gib(report.budget.kv_cache_bytes)}")
    else:
        console.print(_gpu_table(report))
        console.print(_budget_table(report))
    console.print(_kv_table(report))
    if not _kv_budget_given(report):
        console.print(verdict.range_line(report), soft_wrap=True)
    if report.workloads:
        console.print(_workload_table(report))
    verdict.print_verdict(console, report)


def _kv_budget_given(report) -> bool:
    return report.budget.kv_cache_memory_bytes is not None


def _title(report) -> Text:
    gpus = report.request.gpus
    return Text.assemble(
        ("kvtool plan", "bold"),
        f"  {report.spec.name} on {len(gpus)} x {gpus[0].name}",
        f"  (tp {report.request.tp}, pp {report.request.pp})",
        f"  vLLM {report.release.name} {'V0' if report.v0 else 'V1'}",
    )


def _facts_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    for row in rows:
        table.add_row(*row)
    return table


def _model_table(report) -> Table:
    spec = report.spec
    kinds = ", ".join(f"{spec.layer_types.count(k)} {k.replace('_', ' ')}" for k in dict.fromkeys(spec.layer_types))
    attention = (
        f"MLA (latent {spec.kv_lora_rank} + rope {spec.qk_rope_head_dim})"
        if spec.is_mla
        else f"{spec.num_attention_heads} heads, {spec.num_key_value_heads} KV heads, head_dim {spec.head_dim}"
    )
    rows = [
        (
            "architecture",
            f"{spec.model_type}, {spec.num_parameters / 1e9:.2f}B parameters"
            + (f", {spec.num_experts} experts" if spec.num_experts else ""),
        ),
        ("layers", kinds),
        ("attention", attention),
        (
            "context",
            f"{spec.derived_max_model_len:,} tokens"
            + (f", window {spec.sliding_window:,}" if spec.sliding_window else ""),
        ),
        (
            "weights",
            f"{report.dtype}" + (f", {spec.quantization}" if spec.quantization or report.request.quantization else ""),
        ),
        ("source", spec.source),
    ]
    return _facts_table("Model", rows)


def _gpu_table(report) -> Table:
    rows = []
    for gpu in dict.fromkeys(report.request.gpus):
        label = f"GPU {gpu.index}" if gpu.index is not None else gpu.source
        reading = f"{gpu.name}, {gib(gpu.total_bytes)} total"
        if gpu.free_bytes is not None:
            reading += f", {gib(gpu.free_bytes)} free, {gib(gpu.used_bytes)} used"
            reading += "".join(f", pid {p.pid} holds {gib(p.used_bytes)}" for p in gpu.processes)
        if gpu.mig_mode:
            reading += ", MIG on"
        rows.append((label, reading))
    return _facts_table("GPU", rows)


def _budget_table(report) -> Table:
    budget = report.budget
    table = Table(
        title=f"Memory per GPU: {gib(budget.total_bytes)} x {budget.gpu_memory_utilization} = "
        f"{gib(budget.requested_bytes)}",
        title_justify="left",
    )
    for column in ("", "GiB", "share", ""):
        table.add_column(column, justify="right" if column in ("GiB", "share") else "left")
    rows = [
        ("weights_bytes", "cyan"),
        ("activation_bytes", "magenta"),
        ("non_torch_bytes", "yellow"),
        ("cudagraph_bytes", "blue"),
        *((("encoder_bytes", "magenta"),) if budget.encoder_bytes else ()),
        *((("other_process_bytes", "red"),) if budget.other_process_bytes else ()),
        *((("kv_headroom_bytes", "dim"),) if budget.kv_headroom_bytes else ()),
    ]
    rows = [(_part_label(report, name), getattr(budget, name), style) for name, style in rows]
    rows += [
        ("KV cache", budget.kv_cache_bytes, "green"),
        ("not used", budget.total_bytes - budget.requested_bytes, "dim"),
    ]
    for label, size, style in rows:
        share = size / budget.total_bytes
        table.add_row(
            label, f"{size / GiB:.2f}", f"{share:.0%}", Text("█" * round(max(share, 0) * BAR_WIDTH), style=style)
        )
    return table


def _part_label(report, name: str) -> str:
    """A part of the budget and where its figure comes from: estimated, or (from a log) measured or derived."""
    if report.from_log is not None:
        return f"{PARTS[name]} ({_from_log().source_label(report.from_log, name)})"
    return PARTS[name] + ("" if name in COMPUTED else " (est.)")


def _from_log():
    """The lines of an answer from a start-up log, imported only for one: other plans do not load the log's."""
    from kvtool.cli import plan_render_log

    return plan_render_log


def _kv_table(report) -> Table:
    chosen, fp8 = report.kv, report.fp8_kv
    dtype = report.request.kv_cache_dtype
    table = Table(title=f"KV cache at max_model_len {chosen.max_model_len:,}", title_justify="left")
    table.add_column("")
    table.add_column(report.dtype if dtype == "auto" else dtype, justify="right")
    table.add_column("fp8", justify="right")
    for label, pick in (
        ("bytes per token", lambda p: f"{p.kv_bytes_per_token:,}"),
        ("bytes per block", lambda p: human_bytes(p.block_bytes)),
        ("blocks", lambda p: f"{p.num_blocks:,}"),
        ("KV cache tokens", lambda p: f"{p.kv_cache_tokens:,}"),
        ("max concurrency", lambda p: f"{p.max_concurrency:.2f}x"),
        ("safe max_model_len", lambda p: f"{p.safe_max_model_len:,}"),
    ):
        table.add_row(label, pick(chosen), pick(fp8))
    return table


def _workload_table(report) -> Table:
    with_vram = not _kv_budget_given(report)
    table = Table(
        title="Workloads: tokens in:out per sequence" + ("; VRAM per GPU for 16 / 64 at once" if with_vram else ""),
        title_justify="left",
    )
    for column in ("workload", "in:out", "KV / seq", "seqs fit", *(("VRAM @16", "VRAM @64") if with_vram else ())):
        table.add_column(column, justify="left" if column == "workload" else "right")
    total = report.budget.total_bytes
    for fit in report.workloads:
        vram = [Text(gib(size), style="red" if size > total else "") for size in fit.vram_bytes.values() if with_vram]
        table.add_row(
            fit.workload.name,
            f"{fit.workload.prompt_tokens}:{fit.workload.output_tokens}",
            human_bytes(fit.kv_bytes_per_sequence),
            f"{fit.sequences_that_fit:,}",
            *vram,
        )
    return table


def print_catalogs(models: bool, gpus: bool) -> None:
    if models:
        from kvtool.engine.sizing.catalog import entries

        table = Table("model", "aliases", title="Model catalog", title_justify="left")
        for entry in entries():
            table.add_row(entry.id, ", ".join(entry.aliases))
        console.print(table)
    if gpus:
        from kvtool.engine.sizing.gpus import gpu_catalog

        table = Table("GPU", "memory", title="GPU catalog", title_justify="left")
        for gpu in gpu_catalog():
            table.add_row(gpu.name, gib(gpu.total_bytes))
        console.print(table)
