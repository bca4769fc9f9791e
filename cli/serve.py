"""`kvtool serve`: an OpenAI-compatible server on the embedded engine (or on vLLM), from a workload profile."""

import os
import shlex
from enum import Enum
from typing import Annotated

import typer
from rich.console import Console

from kvtool.cli import engine_options as flags
from kvtool.cli import output_options as output_flags
from kvtool.cli import server_options as server_flags
from kvtool.cli.engine_options import ENGINE, MODEL
from kvtool.cli.server_options import REQUESTS, SERVER
from kvtool.engine.server import defaults as server_defaults
from kvtool.engine.sizing import defaults, messages
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.kv_cache import KVCacheTooSmallError
from kvtool.engine.sizing.units import GiB, format_gib
from kvtool.errors import StartupError

console = Console(stderr=True, highlight=False, soft_wrap=True)
PROFILE = "Profile"


class Backend(str, Enum):
    embedded = "embedded"
    vllm = "vllm"


Overflow = Enum("Overflow", {policy: policy for policy in defaults.OVERFLOW_POLICIES}, type=str)
ToolCallParser = Enum("ToolCallParser", {name: name for name in server_defaults.TOOL_CALL_PARSERS}, type=str)
TrustRequestChatTemplate = Annotated[
    bool,
    typer.Option(
        "--trust-request-chat-template",
        help="Render a request's own `chat_template` (vLLM's flag; without it such a request is refused).",
        rich_help_panel=REQUESTS,
    ),
]


def serve(  # noqa: PLR0913 (a Typer command: one parameter per option)
    profile: Annotated[
        str | None,
        typer.Option(
            help="Workload profile: a name from `kvtool profiles list` or a path "
            "to a YAML file. Flags below override it.",
            rich_help_panel=PROFILE,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help=f"Model: catalog name, model folder or GGUF file \\[default: {defaults.DEFAULT_MODEL}].",
            rich_help_panel=MODEL,
        ),
    ] = None,
    dtype: flags.Dtype = "auto",
    quantization: flags.Quantization = None,
    device: Annotated[str, typer.Option(help="auto, cuda or cpu.", rich_help_panel=MODEL)] = "auto",
    load_format: Annotated[
        str, typer.Option(help="auto, or dummy for random weights.", rich_help_panel=MODEL)
    ] = "auto",
    max_model_len: flags.MaxModelLen = None,
    max_num_seqs: flags.MaxNumSeqs = None,
    max_num_batched_tokens: flags.MaxNumBatchedTokens = None,
    kv_cache_dtype: flags.KvCacheDtype = None,
    gpu_memory_utilization: flags.GpuMemoryUtilization = None,
    kv_cache_memory: flags.KvCacheMemory = None,
    seed: Annotated[int, typer.Option(help="Engine seed.", rich_help_panel=ENGINE)] = 0,
    threads: Annotated[
        int | None,
        typer.Option(
            help="CPU threads for the engine \\[default: the CPUs this process may use, less those other "
            "processes keep busy, re-measured every half second]. A number fixes the team.",
            rich_help_panel=ENGINE,
        ),
    ] = None,
    overflow: Annotated[
        Overflow | None,
        typer.Option(
            help="prompt + max_tokens > max_model_len: reject with HTTP 400 "
            "(vLLM <= 0.31) or clamp max_tokens (vLLM >= 0.32).",
            rich_help_panel=REQUESTS,
        ),
    ] = None,
    default_max_tokens: Annotated[
        int | None,
        typer.Option(
            help="max_tokens for requests that omit it \\[default: the "
            "profile's, else vLLM's: 16 completions, rest of context chat].",
            rich_help_panel=REQUESTS,
        ),
    ] = None,
    tool_call_parser: Annotated[
        ToolCallParser,
        typer.Option(
            help='How tool_choice "auto" reads tool calls in the reply (vLLM\'s parser names).',
            rich_help_panel=REQUESTS,
        ),
    ] = server_defaults.DEFAULT_TOOL_CALL_PARSER,
    max_logprobs: output_flags.MaxLogprobs = None,
    return_tokens_as_token_ids: output_flags.ReturnTokensAsTokenIds = False,
    enable_prompt_tokens_details: output_flags.EnablePromptTokensDetails = False,
    enable_force_include_usage: output_flags.EnableForceIncludeUsage = False,
    enable_per_request_metrics: output_flags.EnablePerRequestMetrics = False,
    trust_request_chat_template: TrustRequestChatTemplate = False,
    host: Annotated[str, typer.Option(help="Address to bind.", rich_help_panel=SERVER)] = server_defaults.DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to bind.", rich_help_panel=SERVER)] = server_defaults.DEFAULT_PORT,
    uds: server_flags.Uds = None,
    root_path: server_flags.RootPath = None,
    api_key: server_flags.ApiKey = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Model id clients send \\[default: the model's name].", rich_help_panel=SERVER)
    ] = None,
    backend: Annotated[
        Backend,
        typer.Option(
            help="embedded: kvtool's engine; vllm: exec `vllm serve` with the same settings.", rich_help_panel=SERVER
        ),
    ] = Backend.embedded,
    enable_server_load_tracking: server_flags.EnableServerLoadTracking = False,
    enable_request_id_headers: server_flags.EnableRequestIdHeaders = False,
    enable_tokenizer_info_endpoint: server_flags.EnableTokenizerInfoEndpoint = False,
    enable_prompt_embeds: server_flags.EnablePromptEmbeds = False,
) -> None:
    """Start an OpenAI-compatible server: /v1/completions, /v1/chat/completions, /v1/models, /metrics."""
    for name, value in defaults.CPU_OMP_ENVIRONMENT.items():
        os.environ.setdefault(name, value)  # read once, when torch loads its OpenMP runtime
    from kvtool.cli import serve_startup as startup
    from kvtool.engine.server.serving import OutputOptions

    request = startup.ServeRequest(
        profile=profile,
        model=model,
        host=host,
        port=port,
        uds=uds,
        root_path=root_path,
        api_keys=tuple(api_key or ()),
        enable_server_load_tracking=enable_server_load_tracking,
        enable_request_id_headers=enable_request_id_headers,
        enable_tokenizer_info_endpoint=enable_tokenizer_info_endpoint,
        served_model_name=served_model_name,
        default_max_tokens=default_max_tokens,
        tool_call_parser=ToolCallParser(tool_call_parser).value,
        output=OutputOptions(
            return_tokens_as_token_ids=return_tokens_as_token_ids,
            enable_prompt_tokens_details=enable_prompt_tokens_details,
            enable_force_include_usage=enable_force_include_usage,
            enable_per_request_metrics=enable_per_request_metrics,
        ),
        trust_request_chat_template=trust_request_chat_template,
        engine_args=EngineArgs(
            dtype=dtype,
            quantization=quantization,
            device=device,
            load_format=load_format,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            kv_cache_dtype=kv_cache_dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_memory=kv_cache_memory,
            seed=seed,
            threads=threads,
            overflow=overflow.value if overflow else None,
            enable_prompt_embeds=enable_prompt_embeds or None,
            max_logprobs=max_logprobs,
        ),
    )
    if backend is Backend.vllm:
        _exec_vllm(startup.vllm_argv(request), request.api_keys)
    _serve_embedded(startup.plan_startup(request))


def _serve_embedded(plan) -> None:
    from kvtool.cli import serve_startup as startup

    _render_plan(plan)
    try:
        startup.run(plan, lambda engine, settings: _render_ready(plan, engine, settings))
    except KVCacheTooSmallError as err:
        more = "--kv-cache-memory" if plan.device.kind == "cpu" else "--gpu-memory-utilization"
        raise StartupError(
            str(err),
            fix=f"kvtool: the estimated safe length is {err.estimated_max_model_len} "
            f"tokens: restart with --max-model-len {err.estimated_max_model_len}, or raise {more}.",
        ) from None
    console.print("kvtool serve: stopped.")


def _exec_vllm(argv: list[str], api_keys: tuple[str, ...]) -> None:
    """One key travels as VLLM_API_KEY, out of sight of `ps`; VLLM_API_KEY holds one, so several go on the
    command line, as `vllm serve --api-key A B` takes them."""
    console.print("kvtool serve: exec " + shlex.join(argv))
    env = {**os.environ, "VLLM_API_KEY": api_keys[0]} if len(api_keys) == 1 else dict(os.environ)
    os.execvpe(argv[0], argv + (["--api-key", *api_keys] if len(api_keys) > 1 else []), env)


def _render_plan(plan) -> None:
    where = f"profile {plan.profile.name}" if plan.profile else "no profile"
    console.print(f"[bold]kvtool serve[/] ({where}): model {plan.spec.name} on {plan.device.name}")
    for note in plan.serve_plan.notes:
        console.print(f"  [yellow]instead:[/] {note}")


def _format_bytes(num_bytes: int) -> str:
    return f"{format_gib(num_bytes)} GiB" if num_bytes >= GiB else f"{num_bytes / (1 << 20):.0f} MiB"


def _render_ready(plan, engine, settings) -> None:
    config, info = engine.config, engine.kv_cache_info
    model, cache, scheduler = config.model_config, config.cache_config, config.scheduler_config
    budget = (
        f"kv_cache_memory {_format_bytes(cache.kv_cache_memory)}"
        if cache.kv_cache_memory
        else f"gpu_memory_utilization {cache.gpu_memory_utilization}"
    )
    console.print(
        f"  max_model_len {model.max_model_len}, max_num_seqs {scheduler.max_num_seqs}, max_num_batched_tokens "
        f"{scheduler.max_num_batched_tokens}, kv_cache_dtype {cache.kv_cache_dtype}, {budget}, overflow "
        f"{model.overflow}, default max_tokens {settings.default_max_tokens or 'as vLLM (16 / rest of context)'}"
    )
    console.print(
        "  "
        + messages.kv_cache_size_log(
            info.kv_cache_tokens, model.max_model_len, info.max_concurrency, plan.device.log_name
        )
    )
    key = " (API key required)" if settings.api_keys else ""
    where = plan.request.api_url
    console.print(f"  serving {settings.model_name!r} at {where}{key}; metrics at /metrics. Ctrl-C stops.")
