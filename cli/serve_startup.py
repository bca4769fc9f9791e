"""From `kvtool serve` flags to a running server: the plan, the engine, uvicorn; or `vllm serve` argv."""

from __future__ import annotations

import asyncio
import inspect
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from kvtool.cli.serve_config import DeviceInfo, ServePlan, build_serve_plan, detect_device
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.server.defaults import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_TOOL_CALL_PARSER
from kvtool.engine.server.serving import OutputOptions, ServerSettings
from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import KvtoolError
from kvtool.profiles.vllm_flags import DEFAULT_HF_MODEL, vllm_engine_settings, vllm_serve_argv
from kvtool.profiles.workload import WorkloadProfile, load_profile

TRUST_REQUEST_CHAT_TEMPLATE = "--trust-request-chat-template"  # a switch in both `kvtool serve` and `vllm serve`
# `kvtool serve` flags that `vllm serve` takes under the same name
VLLM_FLAG_KEYS = (
    "dtype",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "seed",
    "max_logprobs",
)


@dataclass
class ServeRequest:
    """What `kvtool serve` was asked for; None means "not given" (the profile or the default decides)."""

    profile: str | None = None
    model: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    uds: str | None = None  # a unix socket path: served there instead of host:port
    root_path: str | None = None
    api_keys: tuple[str, ...] = ()
    enable_server_load_tracking: bool = False
    enable_request_id_headers: bool = False
    enable_tokenizer_info_endpoint: bool = False
    served_model_name: str | None = None
    default_max_tokens: int | None = None
    tool_call_parser: str = DEFAULT_TOOL_CALL_PARSER
    output: OutputOptions = field(default_factory=OutputOptions)
    trust_request_chat_template: bool = False
    engine_args: EngineArgs = field(default_factory=EngineArgs)  # the engine flags given (None: not given)

    @property
    def api_url(self) -> str:
        """Where clients reach the API, for the start-up line."""
        if self.uds:
            return f"/v1 on the unix socket {self.uds}"
        return f"http://{self.host}:{self.port}{self.root_path or ''}/v1"

    def load_profile(self) -> WorkloadProfile | None:
        return load_profile(self.profile) if self.profile else None


@dataclass
class StartupPlan:
    request: ServeRequest
    profile: WorkloadProfile | None
    spec: ModelSpec
    device: DeviceInfo
    serve_plan: ServePlan

    @property
    def engine_args(self) -> EngineArgs:
        return self.serve_plan.engine_args


def plan_startup(request: ServeRequest) -> StartupPlan:
    profile = request.load_profile()
    model = request.model or (profile.model if profile else None) or defaults.DEFAULT_MODEL
    spec = resolve_model_spec(model)
    device = detect_device(request.engine_args.device)
    flags = replace(request.engine_args, model=model)
    serve_plan = build_serve_plan(profile, flags, device, spec, request.default_max_tokens)
    return StartupPlan(request, profile, spec, device, serve_plan)


def vllm_argv(request: ServeRequest) -> list[str]:
    """`vllm serve` with the profile's settings, the flags given, and the server options.

    The API key is not on the command line (where `ps` shows it): pass it as VLLM_API_KEY.
    """
    profile = request.load_profile()
    settings = vllm_engine_settings(profile) if profile else {}
    given = request.engine_args
    settings |= {key: getattr(given, key) for key in VLLM_FLAG_KEYS if getattr(given, key) is not None}
    settings |= {"host": request.host, "port": request.port, "served_model_name": request.served_model_name}
    settings |= {"uds": request.uds, "root_path": request.root_path}
    settings |= {
        "enable_server_load_tracking": request.enable_server_load_tracking,
        "enable_request_id_headers": request.enable_request_id_headers,
        "enable_tokenizer_info_endpoint": request.enable_tokenizer_info_endpoint,
        "enable_prompt_embeds": bool(given.enable_prompt_embeds),
    }
    model = request.model or (profile.model if profile else None) or DEFAULT_HF_MODEL
    if shutil.which("vllm") is None:
        raise KvtoolError(
            "--backend vllm needs vLLM, and `vllm` is not on PATH.",
            "Install it (pip install vllm) on a machine it supports, or use --backend embedded.",
        )
    switches = [f"--{name.replace('_', '-')}" for name, on in asdict(request.output).items() if on]  # vLLM's names
    switches += [TRUST_REQUEST_CHAT_TEMPLATE] * request.trust_request_chat_template
    return vllm_serve_argv(model, settings) + switches


def server_settings(plan: StartupPlan, engine) -> ServerSettings:
    return ServerSettings(
        model_name=plan.request.served_model_name or engine.model_name,
        api_keys=plan.request.api_keys,
        default_max_tokens=plan.serve_plan.default_max_tokens,
        tool_call_parser=plan.request.tool_call_parser,
        root_path=plan.request.root_path,
        enable_server_load_tracking=plan.request.enable_server_load_tracking,
        enable_request_id_headers=plan.request.enable_request_id_headers,
        enable_tokenizer_info_endpoint=plan.request.enable_tokenizer_info_endpoint,
        output=plan.request.output,
        trust_request_chat_template=plan.request.trust_request_chat_template,
    )


def run(plan: StartupPlan, on_ready: Callable[[object, ServerSettings], None]) -> None:
    """Load the engine (KVCacheTooSmallError when it cannot start), call on_ready, serve until a signal."""
    asyncio.run(_run(plan, on_ready))


async def _run(plan: StartupPlan, on_ready) -> None:
    from kvtool.engine.runtime.async_llm import AsyncLLM
    from kvtool.engine.server.launcher import configure_logging, serve_engine

    engine = AsyncLLM.from_engine_args(plan.engine_args)
    if inspect.isawaitable(engine):
        engine = await engine
    settings = server_settings(plan, engine)
    on_ready(engine, settings)
    configure_logging()
    request = plan.request
    await serve_engine(engine, settings, request.host, request.port, request.uds)
