"""Profile + command-line flags + the device at hand -> the EngineArgs `kvtool serve` starts the engine with.

When the profile asks for something this device cannot do (tensor parallel 4 on one device, an fp8
KV cache on a CPU, a GPU memory fraction without a GPU), the plan takes the nearest thing that
works and keeps a note saying what was chosen instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from kvtool.engine.sizing import context_length, messages
from kvtool.engine.sizing.context_length import AUTO_MAX_MODEL_LEN
from kvtool.engine.sizing.defaults import CPU_KV_CACHE_CAP, CPU_SCHEDULER_LIMITS
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.gguf_spec import engine_quantization
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import format_gib
from kvtool.engine.sizing.weights import resolve_dtype, run_dtype
from kvtool.errors import UsageError
from kvtool.profiles.workload import WorkloadProfile


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
    engine_args: EngineArgs  # what the engine is started with: it decides what is still not given
    default_max_tokens: int | None  # the profile's (or --default-max-tokens) for requests that send none
    notes: list[str] = field(default_factory=list)  # "what was chosen instead", one line each


def build_serve_plan(
    profile: WorkloadProfile | None,
    flags: EngineArgs,
    device: DeviceInfo,
    spec: ModelSpec,
    default_max_tokens: int | None = None,
) -> ServePlan:
    """The profile's settings under the flags given (`flags`: None is not given), fitted to the device."""
    args, sources = _merge(profile, flags)
    plan = ServePlan(replace(args, device=device.kind), default_max_tokens or (profile.max_tokens if profile else None))
    _fit_max_model_len(plan, sources, spec)
    _fit_parallelism(plan, sources, device)
    _fit_kv_cache(plan, sources, device, spec)
    _fit_auto_max_model_len(plan, device, spec)
    _fit_batch(plan, sources)
    plan.engine_args.check_for_engine()
    return plan


def _merge(profile: WorkloadProfile | None, flags: EngineArgs) -> tuple[EngineArgs, dict[str, str]]:
    """The profile's settings with the flags' over them, and where each came from."""
    if profile is None:
        args, sources = EngineArgs(), {}
    else:
        args = profile.engine_args()
        sources = dict.fromkeys(args.given(), f"profile {profile.name}")
    given = {f.name: getattr(flags, f.name) for f in fields(flags) if getattr(flags, f.name) is not None}
    sources |= {name: "--" + name.replace("_", "-") for name in given}
    return replace(args, **given), sources


def _change(plan: ServePlan, note: str, **settings) -> None:
    plan.engine_args = replace(plan.engine_args, **settings)
    plan.notes.append(note)


def _fit_max_model_len(plan: ServePlan, sources: dict, spec: ModelSpec) -> None:
    """A length above the model's: refused when a flag asks for it, lowered with a note when a profile does."""
    asked = plan.engine_args.max_model_len
    if asked is None or asked == AUTO_MAX_MODEL_LEN:
        return
    flag = sources["max_model_len"].startswith("--")
    length = context_length.resolve_max_model_len(
        asked,
        KVCacheSpec(spec),
        above_model="refuse" if flag else "lower",
        fix=f"Use --max-model-len {spec.derived_max_model_len} or less.",
    )
    if length != asked:
        note = f"max_model_len {asked} ({sources['max_model_len']}) -> {length}: the context of {spec.name}."
        _change(plan, note, max_model_len=length)


def _fit_parallelism(plan: ServePlan, sources: dict, device: DeviceInfo) -> None:
    tp = plan.engine_args.tensor_parallel_size or 1
    if tp == 1:
        return
    found = f"{device.count} CUDA device(s)" if device.kind == "cuda" else "a CPU"
    note = (
        f"tensor_parallel_size {tp} ({sources['tensor_parallel_size']}) -> 1: the embedded engine runs "
        f"on one device (found {found}); `--backend vllm` serves with tensor parallelism."
    )
    _change(plan, note, tensor_parallel_size=1)


def _fit_kv_cache(plan: ServePlan, sources: dict, device: DeviceInfo, spec: ModelSpec) -> None:
    if device.kind != "cpu":
        return
    args = plan.engine_args
    quantized = engine_quantization(spec.source, device.kind, args.dtype, args.quantization)
    if quantized:
        plan.notes.append(messages.GGUF_QUANTIZED_NOTE)
    elif not device.fast_bf16 and resolve_dtype(args.dtype, spec.dtype) == "bfloat16":
        plan.notes.append(messages.BF16_EMULATED_NOTE.format(dtype=args.dtype))
    spec = replace(spec, dtype=run_dtype(args.dtype, spec.dtype, quantized))
    dtype = args.kv_cache_dtype or "auto"
    if dtype.startswith("fp8"):
        note = (
            f"kv_cache_dtype {dtype} ({sources['kv_cache_dtype']}) -> auto ({spec.dtype}): "
            "the fp8 KV cache needs a CUDA GPU."
        )
        _change(plan, note, kv_cache_dtype="auto")
    if plan.engine_args.kv_cache_memory is None:
        _fit_cpu_kv_budget(plan, spec)


def _fit_cpu_kv_budget(plan: ServePlan, spec: ModelSpec) -> None:
    """On CPU the KV cache gets what max_num_seqs full-length requests need, at most CPU_KV_CACHE_CAP."""
    args = plan.engine_args
    max_model_len = args.max_model_len
    if max_model_len in (None, AUTO_MAX_MODEL_LEN):  # auto: the budget of the model's full context
        max_model_len = spec.derived_max_model_len
    cache = KVCacheSpec(spec, KVLayout(kv_cache_dtype=args.kv_cache_dtype or "auto"))
    max_num_seqs = args.max_num_seqs or CPU_SCHEDULER_LIMITS["server"][1]
    budget = min(CPU_KV_CACHE_CAP, cache.request_bytes(max_model_len) * max_num_seqs + cache.block_bytes)
    util = args.gpu_memory_utilization
    asked = f"gpu_memory_utilization {util} is a fraction of GPU memory; " if util else ""
    note = (
        f"{asked}on CPU the KV cache gets {format_gib(budget)} GiB "
        f"(max_num_seqs full-length sequences, at most {format_gib(CPU_KV_CACHE_CAP)} GiB; "
        "set --kv-cache-memory to change)."
    )
    _change(plan, note, kv_cache_memory=budget, gpu_memory_utilization=None)


def _fit_auto_max_model_len(plan: ServePlan, device: DeviceInfo, spec: ModelSpec) -> None:
    """`--max-model-len auto`: the largest length whose one request fits the KV budget, by the arithmetic of
    `kvtool plan --max-model-len auto` and the engine's start-up check (vLLM's auto-fit, done before loading)."""
    args = plan.engine_args
    if args.max_model_len != AUTO_MAX_MODEL_LEN:
        return
    budget = args.kv_cache_memory
    if budget is None:
        raise UsageError(
            "--max-model-len auto on a GPU needs --kv-cache-memory: the embedded engine fixes its context "
            "length before it measures the memory left for the KV cache.",
            "Give --kv-cache-memory, or a length (`kvtool plan --max-model-len auto` computes one for this GPU).",
        )
    quantized = engine_quantization(spec.source, device.kind, args.dtype, args.quantization)
    run_spec = replace(spec, dtype=run_dtype(args.dtype, spec.dtype, quantized))
    layout = KVLayout(kv_cache_dtype=args.kv_cache_dtype or "auto", max_num_batched_tokens=args.max_num_batched_tokens)
    length = context_length.resolve_max_model_len(AUTO_MAX_MODEL_LEN, KVCacheSpec(run_spec, layout), budget)
    plan.engine_args = replace(args, max_model_len=length)
    if length < spec.derived_max_model_len:  # vLLM's log line when it lowers the length
        plan.notes.append(
            f"Auto-fit max_model_len: reduced from {spec.derived_max_model_len} to {length} "
            f"to fit in available KV cache memory ({format_gib(budget)} GiB {device.log_name})"
        )


def _fit_batch(plan: ServePlan, sources: dict) -> None:
    seqs, batched = plan.engine_args.max_num_seqs, plan.engine_args.max_num_batched_tokens
    if seqs is not None and batched is not None and batched < seqs:
        note = (
            f"max_num_seqs {seqs} ({sources['max_num_seqs']}) -> {batched}: it cannot exceed "
            f"max_num_batched_tokens ({batched})."
        )
        _change(plan, note, max_num_seqs=batched)
