"""Profile + command-line flags + the device at hand -> the EngineConfig `kvtool serve` starts.

When the profile asks for something this device cannot do (tensor parallel 4 on one device, an fp8
KV cache on a CPU, a GPU memory fraction without a GPU), the plan takes the nearest thing that
works and keeps a note saying what was chosen instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvtool.engine.runtime.config import EngineConfig
from kvtool.engine.sizing import messages
from kvtool.engine.sizing.defaults import CPU_KV_CACHE_CAP, CPU_SCHEDULER_LIMITS
from kvtool.engine.sizing.engine_args import AUTO_MAX_MODEL_LEN, resolve_max_model_len
from kvtool.engine.sizing.gguf_spec import engine_quantization
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import format_gib
from kvtool.engine.sizing.weights import resolve_dtype
from kvtool.errors import UsageError
from kvtool.profiles.vllm_flags import ENGINE_KEYS
from kvtool.profiles.workload import WorkloadProfile

PROFILE_ENGINE_KEYS = (*ENGINE_KEYS, "overflow")  # the keys vLLM shares, plus kvtool's overflow policy


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda" | "cpu"
    count: int = 1
    name: str = "CPU"
    # bf16 matmuls at speed: bf16 instructions (oneDNN packs bf16 weights) or AVX2 (the C kernels' column
    # panels); elsewhere a CPU runs bf16 emulated
    fast_bf16: bool = True

    @property
    def log_name(self) -> str:
        """The device as vLLM's log lines name it."""
        return "GPU" if self.kind == "cuda" else "CPU"


def detect_device(requested: str = "auto") -> DeviceInfo:
    import torch  # serve needs torch anyway; keep it out of `--help`

    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        from kvtool.kernels.cpu_linear import can_pack

        return DeviceInfo("cpu", fast_bf16=can_pack(torch.device("cpu"), torch.bfloat16))
    if not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but no CUDA device is visible.", "Use --device cpu or auto.")
    return DeviceInfo("cuda", torch.cuda.device_count(), torch.cuda.get_device_name(0))


@dataclass
class ServePlan:
    engine_config: EngineConfig
    default_max_tokens: int | None
    notes: list[str] = field(default_factory=list)  # "what was chosen instead", one line each


def build_serve_plan(
    profile: WorkloadProfile | None, overrides: dict, device: DeviceInfo, spec: ModelSpec
) -> ServePlan:
    """`overrides` holds the EngineConfig fields given on the command line (None = not given)."""
    settings, sources = _merge(profile, overrides)
    plan = ServePlan(EngineConfig(), overrides.get("default_max_tokens") or (profile.max_tokens if profile else None))
    settings["device"] = device.kind
    _fit_max_model_len(settings, sources, spec, plan)
    _fit_parallelism(settings, sources, device, plan)
    _fit_kv_cache(settings, sources, device, spec, plan)
    _fit_auto_max_model_len(settings, device, spec, plan)
    _fit_batch(settings, sources, plan)
    if plan.default_max_tokens is not None and settings.get("max_model_len"):
        plan.default_max_tokens = min(plan.default_max_tokens, settings["max_model_len"])
    plan.engine_config = EngineConfig.from_kwargs(**settings)
    return plan


def _merge(profile: WorkloadProfile | None, overrides: dict) -> tuple[dict, dict]:
    settings, sources = {}, {}
    if profile is not None:
        for key in PROFILE_ENGINE_KEYS:
            settings[key], sources[key] = getattr(profile, key), f"profile {profile.name}"
        if profile.model:
            settings["model"], sources["model"] = profile.model, f"profile {profile.name}"
    for key, value in overrides.items():
        if value is not None and key != "default_max_tokens":
            settings[key], sources[key] = value, "--" + key.replace("_", "-")
    return settings, sources


def _fit_max_model_len(settings: dict, sources: dict, spec: ModelSpec, plan: ServePlan) -> None:
    asked, derived = settings.get("max_model_len"), spec.derived_max_model_len
    if asked is None or asked <= derived:
        return
    if sources["max_model_len"].startswith("--"):
        raise UsageError(
            messages.MAX_MODEL_LEN_OVER_DERIVED.format(max_model_len=asked, derived=derived),
            f"Use --max-model-len {derived} or less.",
        )
    settings["max_model_len"] = derived
    plan.notes.append(f"max_model_len {asked} ({sources['max_model_len']}) -> {derived}: the context of {spec.name}.")


def _fit_parallelism(settings: dict, sources: dict, device: DeviceInfo, plan: ServePlan) -> None:
    tp = settings.get("tensor_parallel_size", 1)
    if tp == 1:
        return
    found = f"{device.count} CUDA device(s)" if device.kind == "cuda" else "a CPU"
    settings["tensor_parallel_size"] = 1
    plan.notes.append(
        f"tensor_parallel_size {tp} ({sources['tensor_parallel_size']}) -> 1: the embedded engine runs "
        f"on one device (found {found}); `--backend vllm` serves with tensor parallelism."
    )


def _fit_kv_cache(settings: dict, sources: dict, device: DeviceInfo, spec: ModelSpec, plan: ServePlan) -> None:
    if device.kind != "cpu":
        return
    model_dtype = settings.get("dtype", "auto")
    if engine_quantization(spec.source, device.kind, model_dtype, settings.get("quantization")):
        spec = replace(spec, dtype="float32")
        plan.notes.append(messages.GGUF_QUANTIZED_NOTE)
    elif not device.fast_bf16 and resolve_dtype(model_dtype, spec.dtype) == "bfloat16":
        plan.notes.append(messages.BF16_EMULATED_NOTE.format(dtype=model_dtype))
    dtype = settings.get("kv_cache_dtype", "auto")
    if dtype.startswith("fp8"):
        settings["kv_cache_dtype"] = "auto"
        plan.notes.append(
            f"kv_cache_dtype {dtype} ({sources['kv_cache_dtype']}) -> auto ({spec.dtype}): "
            "the fp8 KV cache needs a CUDA GPU."
        )
    if settings.get("kv_cache_memory") is None:
        settings["kv_cache_memory"] = _cpu_kv_budget(settings, spec)
        util = settings.pop("gpu_memory_utilization", None)
        asked = f"gpu_memory_utilization {util} is a fraction of GPU memory; " if util else ""
        plan.notes.append(
            f"{asked}on CPU the KV cache gets {format_gib(settings['kv_cache_memory'])} GiB "
            f"(max_num_seqs full-length sequences, at most {format_gib(CPU_KV_CACHE_CAP)} GiB; "
            "set --kv-cache-memory to change)."
        )


def _fit_auto_max_model_len(settings: dict, device: DeviceInfo, spec: ModelSpec, plan: ServePlan) -> None:
    """`--max-model-len auto`: the largest length whose one request fits the KV budget, by the arithmetic of
    `kvtool plan --max-model-len auto` and the engine's start-up check (vLLM's auto-fit, done before loading)."""
    if settings.get("max_model_len") != AUTO_MAX_MODEL_LEN:
        return
    budget = settings.get("kv_cache_memory")
    if budget is None:
        raise UsageError(
            "--max-model-len auto on a GPU needs --kv-cache-memory: the embedded engine fixes its context "
            "length before it measures the memory left for the KV cache.",
            "Give --kv-cache-memory, or a length (`kvtool plan --max-model-len auto` computes one for this GPU).",
        )
    dtype = settings.get("dtype", "auto")
    quantized = engine_quantization(spec.source, device.kind, dtype, settings.get("quantization"))
    run_spec = replace(spec, dtype="float32" if quantized else resolve_dtype(dtype, spec.dtype))
    layout = KVLayout(
        kv_cache_dtype=settings.get("kv_cache_dtype", "auto"),
        max_num_batched_tokens=settings.get("max_num_batched_tokens"),
    )
    settings["max_model_len"] = resolve_max_model_len(AUTO_MAX_MODEL_LEN, KVCacheSpec(run_spec, layout), budget)
    if settings["max_model_len"] < spec.derived_max_model_len:  # vLLM's log line when it lowers the length
        plan.notes.append(
            f"Auto-fit max_model_len: reduced from {spec.derived_max_model_len} to {settings['max_model_len']} "
            f"to fit in available KV cache memory ({format_gib(budget)} GiB {device.log_name})"
        )


def _cpu_kv_budget(settings: dict, spec: ModelSpec) -> int:
    max_model_len = settings.get("max_model_len")
    if max_model_len in (None, AUTO_MAX_MODEL_LEN):  # auto: the budget of the model's full context
        max_model_len = spec.derived_max_model_len
    cache = KVCacheSpec(spec, KVLayout(kv_cache_dtype=settings.get("kv_cache_dtype", "auto")))
    max_num_seqs = settings.get("max_num_seqs") or CPU_SCHEDULER_LIMITS["server"][1]
    return min(CPU_KV_CACHE_CAP, cache.request_bytes(max_model_len) * max_num_seqs + cache.block_bytes)


def _fit_batch(settings: dict, sources: dict, plan: ServePlan) -> None:
    seqs, batched = settings.get("max_num_seqs"), settings.get("max_num_batched_tokens")
    if seqs is not None and batched is not None and batched < seqs:
        settings["max_num_seqs"] = batched
        plan.notes.append(
            f"max_num_seqs {seqs} ({sources['max_num_seqs']}) -> {batched}: it cannot exceed "
            f"max_num_batched_tokens ({batched})."
        )
