"""What `kvtool plan` advises: the flags to start with, and what to watch out for."""

import json
import shlex

from kvtool.engine.plan import estimates
from kvtool.engine.sizing import catalog, context_length, messages
from kvtool.engine.sizing.defaults import FP8_KV_CACHE_DTYPES, HIGHEST_ADVISED_UTILIZATION
from kvtool.engine.sizing.memory_budget import utilization_for
from kvtool.engine.sizing.units import format_gib

MiB = 1 << 20


def recommendations(report) -> dict:
    """Flags that start: the asked length when it fits, else the safe length (or fp8 KV when that is enough)."""
    request, kv = report.request, report.kv
    advice = {
        "max_model_len": kv.max_model_len,
        "kv_cache_dtype": request.kv_cache_dtype,
        "gpu_memory_utilization": request.gpu_memory_utilization,
    }
    if not report.fits:
        fp8_fits = report.fp8_kv.fits and request.kv_cache_dtype not in FP8_KV_CACHE_DTYPES
        if fp8_fits and context_length.within_model(kv.max_model_len, report.spec):
            advice["kv_cache_dtype"] = "fp8"
        else:
            advice["max_model_len"] = context_length.longest_within_model(kv.safe_max_model_len, report.spec)
        advice["gpu_memory_utilization_to_fit"] = utilization_to_fit(report)
    model = request.model or report.spec.name
    hf_id = report.spec.name if catalog.find(model) else model  # vLLM knows HF ids, not our aliases
    blocked = _no_command_reason(report, advice)
    if blocked:  # no length starts with these settings: print no command that would fail
        return {**advice, "vllm_serve": None, "kvtool_serve": None, "no_command_reason": blocked}
    advice["vllm_serve"] = _command(["vllm", "serve", hf_id], report, advice, vllm=True)
    advice["kvtool_serve"] = _command(["kvtool", "serve", "--model", model], report, advice, vllm=False)
    return advice


def _no_command_reason(report, advice: dict) -> str | None:
    failed = report.failed_check
    if failed is not None and failed.name == "free_memory":
        return "other processes hold the GPU: free them, or lower --gpu-memory-utilization below the free share."
    if failed is not None and failed.name == "weights":
        return "the weights do not fit: raise --tensor-parallel-size or use a quantized checkpoint."
    if advice["max_model_len"] < 1:
        return "no max_model_len fits: raise --gpu-memory-utilization, --tensor-parallel-size, or quantize."
    return None


def utilization_to_fit(report) -> float | None:
    """The gpu_memory_utilization at which one max_model_len request fits (None above 0.98)."""
    budget, kv = report.budget, report.kv
    need = budget.non_kv_cache_bytes + kv.request_bytes + kv.block_bytes
    utilization = utilization_for(need, budget.total_bytes)
    return utilization if utilization <= HIGHEST_ADVISED_UTILIZATION else None


def _command(head: list[str], report, advice: dict, vllm: bool) -> str:
    """Every flag the plan assumed, so that the command starts what was planned."""
    request = report.request
    args = [*head, "--max-model-len", str(advice["max_model_len"])]
    kv_memory = report.budget.kv_cache_memory_bytes
    if kv_memory is not None:
        args += ["--kv-cache-memory-bytes", str(kv_memory)] if vllm else ["--kv-cache-memory", f"{kv_memory // MiB}MiB"]
    else:
        args += ["--gpu-memory-utilization", str(advice["gpu_memory_utilization"])]
    if advice["kv_cache_dtype"] != "auto":
        args += ["--kv-cache-dtype", advice["kv_cache_dtype"]]
    if request.dtype != "auto":
        args += ["--dtype", request.dtype]
    if vllm:
        args += _vllm_only_flags(report)
    for flag, value in (
        ("--max-num-seqs", request.max_num_seqs),
        ("--max-num-batched-tokens", request.max_num_batched_tokens),
    ):
        if value:
            args += [flag, str(value)]
    return shlex.join(args)


def _vllm_only_flags(report) -> list[str]:
    request, args = report.request, []
    for flag, value in (("--tensor-parallel-size", request.tp), ("--pipeline-parallel-size", request.pp)):
        if value > 1:
            args += [flag, str(value)]
    if request.quantization:
        args += ["--quantization", request.quantization]
    if request.block_size_given:
        args += ["--block-size", str(request.block_size)]
    if request.enforce_eager:
        args.append("--enforce-eager")
    if request.limit_mm_per_prompt is not None:
        limits = request.limit_mm_per_prompt
        text = (
            json.dumps(limits, separators=(",", ":"))
            if report.release.reached("json_cli_args")
            else ",".join(f"{key}={value}" for key, value in limits.items())
        )
        args += ["--limit-mm-per-prompt", text]
    return args


def warnings(report) -> list[str]:
    spec, kv, budget, gpu = report.spec, report.kv, report.budget, report.request.gpu
    failed = report.failed_check
    notes = [failed.message] if failed else []
    if failed and failed.name == "kv_memory":
        notes.append(
            f"weights and overheads take {format_gib(budget.non_kv_cache_bytes)} GiB of the "
            f"{format_gib(budget.requested_bytes)} GiB budget: no memory is left for the KV cache."
        )
    if not context_length.within_model(kv.max_model_len, spec):
        notes.append(
            messages.MAX_MODEL_LEN_OVER_DERIVED.format(
                max_model_len=kv.max_model_len, derived=spec.derived_max_model_len
            )
        )
    if kv.fits and kv.max_concurrency < min(report.max_num_seqs, 16):
        notes.append(
            f"only {kv.max_concurrency:.2f} full-length requests fit at once: expect preemption under "
            "concurrency (lower max_model_len or use fp8 KV)."
        )
    if gpu.free_bytes is not None and gpu.free_bytes < budget.requested_bytes:
        which = "the GPU" if gpu.index is None else f"GPU {gpu.index}"
        notes.append(
            f"{which} has {format_gib(gpu.free_bytes)} GiB free, less than the "
            f"{format_gib(budget.requested_bytes)} GiB requested: vLLM would refuse to start."
        )
    if report.dtype == "float32" and report.request.dtype == "auto":  # auto is fp32 only for quantized GGUF
        notes.append(messages.GGUF_QUANTIZED_NOTE)
    if report.dtype == "float32" and budget.kv_cache_memory_bytes is None:
        notes.append("float32 weights: vLLM on GPU would normally run this model in bfloat16.")
    if report.v0 and report.release.reached("v1_default"):
        notes.append(f"vLLM {report.release.name} falls back to its V0 engine for these settings.")
    return notes + estimates.notes(report)
