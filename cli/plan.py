"""`kvtool plan`: KV bytes per token, the memory budget, the safe max_model_len and the flags to start with."""

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli import engine_options as flags
from kvtool.cli.engine_options import BYTE_SIZE, COUNT, ENGINE, MODEL
from kvtool.engine.discovery.gpus import resolve_gpus
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.planner import PlanRequest, PlanTarget, Workload, make_plan
from kvtool.engine.plan.report_json import report_to_json
from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.gpus import GpuInfo, with_free_memory
from kvtool.engine.sizing.kv_layout import parse_layer_partition
from kvtool.engine.sizing.quantization_methods import check_quantization
from kvtool.engine.sizing.release_rules import parse_env_flag
from kvtool.engine.sizing.units import parse_human_int
from kvtool.engine.sizing.vllm_versions import DEFAULT_RELEASE_NAME, NEWEST_NAME, VllmRelease
from kvtool.errors import ExitCode, KvtoolError, UsageError

GPU, WORKLOAD, OUTPUT, LOG = "GPU", "Workload", "Output", "From a start-up log"
DEFAULT_WORKLOADS = (("chat", 1024, 512), ("rag", 6144, 2048), ("long-form", 2048, 8192))


def plan(  # noqa: PLR0913 (a Typer command: one parameter per option)
    from_log: Annotated[
        Path | None,
        typer.Option(
            "--from-log",
            help="A vLLM start-up log: what it measured, answered for the settings given here (the others as in "
            "the log).",
            rich_help_panel=LOG,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Catalog name or alias, HF id, config.json, model folder or .gguf file "
            f"\\[default: {defaults.DEFAULT_MODEL}; with --from-log the log's].",
            rich_help_panel=MODEL,
        ),
    ] = None,
    dtype: flags.Dtype = "auto",
    quantization: flags.Quantization = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            help="A GPU name (H100-80GB, L4, ...), device indices (0,1), or local \\[default: the local devices].",
            rich_help_panel=GPU,
        ),
    ] = None,
    gpu_mem: Annotated[
        str | None, typer.Option(help="Memory of one GPU, e.g. 23.58GiB or 80GB.", rich_help_panel=GPU)
    ] = None,
    num_gpus: Annotated[
        int | None, typer.Option(click_type=COUNT, help="How many GPUs \\[default: tp x pp].", rich_help_panel=GPU)
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option(
            "--tp",
            "--tensor-parallel-size",
            click_type=COUNT,
            help="Tensor-parallel size \\[default: 1].",
            rich_help_panel=GPU,
        ),
    ] = None,
    pp: Annotated[
        int | None,
        typer.Option(
            "--pp",
            "--pipeline-parallel-size",
            click_type=COUNT,
            help="Pipeline-parallel size \\[default: 1].",
            rich_help_panel=GPU,
        ),
    ] = None,
    gpu_free: Annotated[
        int | None,
        typer.Option(
            click_type=BYTE_SIZE,
            help="Memory other processes leave free on each GPU, e.g. 60GiB \\[default: NVML's reading].",
            rich_help_panel=GPU,
        ),
    ] = None,
    vllm_version: Annotated[
        str | None,
        typer.Option(
            help=f"The vLLM release to predict, 0.2 to {NEWEST_NAME} (V0 before 0.8) "
            f"\\[default: {DEFAULT_RELEASE_NAME}; with --from-log the log's].",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    gpu_memory_utilization: flags.GpuMemoryUtilization = None,
    max_model_len: flags.MaxModelLen = None,
    kv_cache_dtype: flags.KvCacheDtype = None,
    max_num_seqs: flags.MaxNumSeqs = None,
    max_num_batched_tokens: flags.MaxNumBatchedTokens = None,
    kv_cache_memory: flags.KvCacheMemory = None,
    block_size: Annotated[
        int | None,
        typer.Option(
            click_type=COUNT, help="Tokens per KV block \\[default: 16; 64 for MLA models].", rich_help_panel=ENGINE
        ),
    ] = None,
    enforce_eager: Annotated[
        bool | None,
        typer.Option(
            "--enforce-eager/--no-enforce-eager",
            help="No CUDA graphs (their memory goes to the KV cache) \\[default: no].",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    limit_mm_per_prompt: Annotated[
        str | None,
        typer.Option(
            help="Items per prompt by modality: image=2,audio=0 or '{\"image\": 2}' \\[default: vLLM's].",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option(
            help="PROMPT:OUTPUT tokens, e.g. 6144:2048 (repeatable) \\[default: the shipped profiles].",
            rich_help_panel=WORKLOAD,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.", rich_help_panel=OUTPUT)] = False,
    list_models: Annotated[
        bool, typer.Option("--list-models", help="List the model catalog and exit.", rich_help_panel=OUTPUT)
    ] = False,
    list_gpus: Annotated[
        bool, typer.Option("--list-gpus", help="List the GPU catalog and exit.", rich_help_panel=OUTPUT)
    ] = False,
) -> None:
    """How much KV cache a model gets on a GPU, the largest max_model_len that starts, and how many sequences fit.

    Exit status: 0 it fits, 1 it does not, 2 bad input.
    """
    if list_models or list_gpus:
        render().print_catalogs(list_models, list_gpus)
        return
    args = EngineArgs(
        model=model,
        dtype=dtype,
        quantization=quantization,
        limit_mm_per_prompt=parse_mm_limits(limit_mm_per_prompt),
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype=kv_cache_dtype,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enforce_eager=enforce_eager,
        kv_cache_memory=kv_cache_memory,
        block_size=block_size,
    )
    target = PlanTarget(gpu, gpu_mem, gpu_free, num_gpus, vllm_version)
    workloads = parse_workloads(workload)
    if from_log is not None:
        _check_choices(None, kv_cache_dtype, dtype, quantization)
        report = _plan_from_log(from_log, args, target, workloads)
    else:
        report = _plan(args, target, workloads)
    if as_json:
        sys.stdout.write(json.dumps(report_to_json(report), indent=2) + "\n")
    else:
        render().print_report(report)
    raise typer.Exit(ExitCode.OK if report.fits else ExitCode.NEGATIVE)


def _plan(args: EngineArgs, target: PlanTarget, workloads: list[Workload]):
    """A plan without a log: every setting not given is vLLM's default."""
    release = VllmRelease.parse(target.vllm_version or DEFAULT_RELEASE_NAME)
    _check_choices(release, args.kv_cache_dtype or "auto", args.dtype, args.quantization)
    spec = resolve_model_spec(args.model_name)
    budget_host = _kv_budget_host(args.kv_cache_memory)
    gpus = resolve_gpus(target.gpu, target.gpu_mem, target.num_gpus, fallback=budget_host)
    request = PlanRequest.from_engine_args(
        args,
        gpus=with_free_memory(gpus, target.gpu_free),
        workloads=workloads,
        release=release,
        pp_layer_partition=parse_layer_partition(os.environ.get("VLLM_PP_LAYER_PARTITION")),
        flashinfer_sampler=parse_env_flag("VLLM_USE_FLASHINFER_SAMPLER"),
    )
    return make_plan(spec, request)


def _plan_from_log(path: Path, args: EngineArgs, target: PlanTarget, workloads: list[Workload]):
    """The log's measured budget answered for the settings given (imported here: plans without a log do not
    load the log reader)."""
    from kvtool.engine.plan.from_log import plan_from_log

    return plan_from_log(path, args, target, workloads)


def render():
    """The rich renderer, imported only when a table is printed: `--json` never loads rich."""
    from kvtool.cli import plan_render

    return plan_render


def _kv_budget_host(kv_bytes: int | None) -> GpuInfo | None:
    """With a KV budget given outright no GPU is needed (the CPU engine's case)."""
    if kv_bytes is None:
        return None
    return GpuInfo(name="no GPU (given KV budget)", total_bytes=kv_bytes, source="kv-cache-memory")


def _check_choices(release: VllmRelease | None, kv_cache_dtype: str | None, dtype: str, quantization: str | None):
    """Values vLLM would reject are refused here, before any planning (the KV dtype by the release's list,
    once the release is known)."""
    if release is not None and kv_cache_dtype is not None:
        release.check_kv_cache_dtype(kv_cache_dtype)
    if dtype not in defaults.DTYPES:
        raise UsageError(f"unknown dtype '{dtype}'.", f"Use one of: {', '.join(defaults.DTYPES)}.")
    check_quantization(quantization, release and release.version, release and release.name)


def parse_mm_limits(text: str | None) -> dict[str, int] | None:
    """`image=2,audio=0` or `{"image": 2}` -> {"image": 2, "audio": 0}."""
    if text is None:
        return None
    try:
        limits = (
            json.loads(text)
            if text.strip().startswith("{")
            else {
                key.strip(): int(value) for key, value in (part.split("=") for part in text.split(",") if part.strip())
            }
        )
        if not isinstance(limits, dict) or any(not isinstance(v, int) or v < 0 for v in limits.values()):
            raise ValueError
    except ValueError:
        raise UsageError(
            f"--limit-mm-per-prompt '{text}' is not MODALITY=COUNT pairs.",
            "Use e.g. --limit-mm-per-prompt image=2,video=0.",
        ) from None
    return limits


def parse_workloads(values: list[str] | None) -> list[Workload]:
    """`6144:2048` or `rag=6144:2048`; without any, one row per shipped profile (or built-in defaults)."""
    if not values:
        return _profile_workloads() or [Workload(*row) for row in DEFAULT_WORKLOADS]
    return [_parse_workload(value) for value in values]


def _parse_workload(value: str) -> Workload:
    name, _, sizes = value.rpartition("=")
    prompt, sep, output = sizes.partition(":")
    try:
        tokens = (parse_human_int(prompt, "prompt"), parse_human_int(output, "output")) if sep else None
    except UsageError:
        tokens = None
    if tokens is None or min(tokens) < 0 or sum(tokens) < 1:
        raise UsageError(f"--workload '{value}' is not PROMPT:OUTPUT tokens.", "Use e.g. --workload 6144:2048.")
    return Workload(name or sizes, *tokens)


def _profile_workloads() -> list[Workload]:
    try:
        from kvtool.profiles.workload import list_profiles

        profiles = list_profiles()
    except (ImportError, KvtoolError):
        return []
    return [
        Workload(p.name, p.max_model_len - p.max_tokens, p.max_tokens)
        for p in profiles
        if p.max_model_len > p.max_tokens
    ]
