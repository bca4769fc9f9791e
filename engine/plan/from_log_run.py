"""The run a start-up log shows, as a plan request: its release, model, GPU and settings, each as the log
states it, else as given beside it (`--model`, `--gpu`, `--dtype`, ...), else vLLM's default."""

import re

from kvtool.engine.discovery.gpus import resolve_gpus
from kvtool.engine.discovery.models import resolve_model_spec, resolve_offline
from kvtool.engine.plan.planner import PlanRequest, PlanTarget, Workload
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.gpus import GpuInfo, with_free_memory
from kvtool.engine.sizing.quantization_methods import QUANTIZATION_METHODS
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import NEWEST, VllmRelease
from kvtool.engine.startup_log.budget import CATALOG, GIVEN, MEASURED, log_gpu
from kvtool.engine.startup_log.reader import VllmStartupLog
from kvtool.engine.startup_log.settings import typed_settings
from kvtool.errors import UsageError

NO_RELEASE = "The log names no vLLM release: answered with {name}'s rules{fix}."
NEWER_RELEASE = "vLLM {name} is newer than the releases kvtool models: answered with {newest}'s rules."
MODEL_UNKNOWN = "The log's model '{model}' is not a local path, a catalog model or in the Hugging Face cache."
MODEL_UNNAMED = "The log does not name its model."
GIVE_MODEL = "Give it with --model: a config.json, a model folder or a Hub id."
SAME_CARD = 0.01  # a GPU given beside a log within this of the one it prints or names is that card


def log_release(log: VllmStartupLog, given: str | None) -> tuple[VllmRelease, list[str]]:
    """The release the log names (any build suffix: 0.11.0+582e4e37.nv25.11), else the given one."""
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", log.vllm_version or "")
    if not match:
        release = VllmRelease.parse(given)
        return release, [NO_RELEASE.format(name=release.name, fix="" if given else " (give --vllm-version)")]
    version = (int(match[1]), int(match[2]), int(match[3] or 0))
    if version[:2] > NEWEST[:2]:
        return VllmRelease(NEWEST), [NEWER_RELEASE.format(name=log.vllm_version, newest=VllmRelease(NEWEST).name)]
    return VllmRelease(version), []


def run_model_spec(log: VllmStartupLog, model: str | None) -> ModelSpec:
    """The given model, else the one the log names, found without the network."""
    if model:
        return resolve_model_spec(model)
    for name in (log.model, log.served_model_name):
        spec = resolve_offline(name) if name else None
        if spec is not None:
            return spec
    raise UsageError(MODEL_UNKNOWN.format(model=log.model) if log.model else MODEL_UNNAMED, GIVE_MODEL)


def given_gpu(target: PlanTarget) -> GpuInfo | None:
    """The GPU named beside the log (--gpu, --gpu-mem, --gpu-free), if one is: the one to answer for instead,
    when the log prints or names its own."""
    if target.gpu is None and target.gpu_mem is None:
        return None
    gpu = resolve_gpus(target.gpu, target.gpu_mem, None)[0]
    return with_free_memory([gpu], target.gpu_free)[0]


def run_gpu(log: VllmStartupLog, given: GpuInfo | None) -> tuple[GpuInfo, str | None]:
    """The GPU the log ran on and where its memory comes from: printed (MEASURED), the catalog's for the
    device it names (the given one where that is the same card), the given one, or None: then solved from the
    log's budget (the GPU returned holds a first guess)."""
    logged = log_gpu(log)
    if logged is not None and (logged.source == "log" or not same_card(given, logged)):
        return logged, MEASURED if logged.source == "log" else CATALOG
    if given is not None:
        return given, GIVEN
    return GpuInfo(name=log.device_name or "GPU", total_bytes=_first_guess(log), source="log"), None


def same_card(given: GpuInfo | None, logged: GpuInfo) -> bool:
    """Whether a GPU given beside the log is the one it names (within 1 %: the catalog rounds), or none is."""
    return given is None or abs(given.total_bytes / logged.total_bytes - 1) <= SAME_CARD


def _first_guess(log: VllmStartupLog) -> int:
    """Weights and KV cache over the utilization: it decides only the scheduler's tier of the estimates."""
    memory = log.memory
    share = (memory.weights_memory_gib or 0) + (memory.available_kv_cache_memory_gib or 0)
    return round(max(share, 1.0) / (log.gpu_memory_utilization or 0.9) * GiB)


def log_request(
    log: VllmStartupLog,
    spec: ModelSpec,
    args: EngineArgs,
    gpu: GpuInfo,
    *,
    release: VllmRelease,
    workloads: list[Workload],
) -> PlanRequest:
    """The log's settings, the EngineArgs given beside it where the log does not say (model, dtype, quantization,
    multimodal limits); V0's profile batch only where its flags set it (else it follows max_model_len)."""
    tp, pp = log.tensor_parallel_size or 1, log.pipeline_parallel_size or 1
    flags = typed_settings(log.args)
    batched = flags.get("max_num_batched_tokens") if log.engine == "V0" else log.max_num_batched_tokens
    return PlanRequest(
        gpus=[gpu] * (tp * pp),
        model=log.model or args.model or spec.name,
        tp=tp,
        pp=pp,
        gpu_memory_utilization=flags.get("gpu_memory_utilization") or log.gpu_memory_utilization,  # V0 prints 2 digits
        max_model_len=log.max_model_len or (log.failure and log.failure.max_model_len) or None,
        kv_cache_dtype=log.kv_cache_dtype or "auto",
        dtype=log.dtype or args.dtype,
        quantization=log.quantization if log.quantization in QUANTIZATION_METHODS else args.quantization,
        max_num_seqs=log.max_num_seqs,
        max_num_batched_tokens=batched,
        block_size=log.block_size,
        enforce_eager=bool(log.enforce_eager),
        kv_cache_memory=log.kv_cache_memory_bytes,
        workloads=workloads,
        release=release,
        limit_mm_per_prompt=_mm_limits(log) or args.limit_mm_per_prompt,
        block_size_given=log.block_size is not None,
        engine=_forced_engine(log, release, gpu),
        cudagraphs_subtracted=log.cudagraph_memory_profiling,
    )


def _forced_engine(log: VllmStartupLog, release: VllmRelease, gpu: GpuInfo) -> str | None:
    """The engine the log ran where the release would have chosen the other (VLLM_USE_V1 set); None where
    the release chose it, so that a what-if follows the release's choice."""
    v0 = release.uses_v0(log.kv_cache_dtype or "auto", gpu.compute_capability)
    return log.engine if log.engine is not None and (log.engine == "V0") != v0 else None


def _mm_limits(log: VllmStartupLog) -> dict[str, int] | None:
    limits = log.args.get("limit_mm_per_prompt")
    if isinstance(limits, dict) and all(isinstance(v, int) for v in limits.values()):
        return limits
    return None
