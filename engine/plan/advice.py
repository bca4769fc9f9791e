"""What `kvtool plan` advises: the flags to start with, and what to watch out for."""

import shlex

from kvtool.engine.sizing import catalog, kv_cache, messages
from kvtool.engine.sizing.defaults import HIGHEST_ADVISED_UTILIZATION
from kvtool.engine.sizing.memory_budget import utilization_for
from kvtool.engine.sizing.units import format_gib

MiB = 1 << 20


def recommendations(report) -> dict:
    """Flags that start: the asked length when it fits, else the safe length (or fp8 KV when that is enough)."""
    request, kv = report.request, report.kv
    advice = {"max_model_len": kv.max_model_len, "kv_cache_dtype": request.kv_cache_dtype,
              "gpu_memory_utilization": request.gpu_memory_utilization}
    if not report.fits:
        fp8_fits = report.fp8_kv.fits and request.kv_cache_dtype not in kv_cache.FP8_KV_CACHE_DTYPES
        if fp8_fits and kv.max_model_len <= report.spec.derived_max_model_len:
            advice["kv_cache_dtype"] = "fp8"
        else:
            advice["max_model_len"] = min(kv.safe_max_model_len, report.spec.derived_max_model_len)
        advice["gpu_memory_utilization_to_fit"] = utilization_to_fit(report)
    model = request.model or report.spec.name
    hf_id = report.spec.name if catalog.find(model) else model  # vLLM knows HF ids, not our aliases
    advice["vllm_serve"] = _command(["vllm", "serve", hf_id], report, advice, vllm=True)
    advice["kvtool_serve"] = _command(["kvtool", "serve", "--model", model], report, advice, vllm=False)
    return advice


def utilization_to_fit(report) -> float | None:
    """The gpu_memory_utilization at which one max_model_len request fits (None above 0.98)."""
    budget, kv = report.budget, report.kv
    need = budget.non_kv_cache_bytes + kv.request_bytes + kv.block_bytes
    utilization = utilization_for(need, budget.total_bytes)
    return utilization if utilization <= HIGHEST_ADVISED_UTILIZATION else None


def _command(head: list[str], report, advice: dict, vllm: bool) -> str:
    request = report.request
    args = [*head, "--max-model-len", str(advice["max_model_len"])]
    kv_memory = report.budget.kv_cache_memory_bytes
    if kv_memory is not None:
        args += ["--kv-cache-memory-bytes", str(kv_memory)] if vllm else ["--kv-cache-memory", f"{kv_memory // MiB}MiB"]
    else:
        args += ["--gpu-memory-utilization", str(advice["gpu_memory_utilization"])]
    if advice["kv_cache_dtype"] != "auto":
        args += ["--kv-cache-dtype", advice["kv_cache_dtype"]]
    if vllm and request.tp > 1:
        args += ["--tensor-parallel-size", str(request.tp)]
    if vllm and request.pp > 1:
        args += ["--pipeline-parallel-size", str(request.pp)]
    for flag, value in (("--max-num-seqs", request.max_num_seqs), ("--max-num-batched-tokens", request.max_num_batched_tokens)):
        if value:
            args += [flag, str(value)]
    return shlex.join(args)


def warnings(report, gpu) -> list[str]:
    spec, kv, budget = report.spec, report.kv, report.budget
    kv_memory_given = budget.kv_cache_memory_bytes
    notes = []
    if budget.kv_cache_bytes <= 0:
        notes.append(f"weights and overheads take {format_gib(budget.non_kv_cache_bytes)} GiB of the "
                     f"{format_gib(budget.requested_bytes)} GiB budget: no memory is left for the KV cache.")
    elif not kv.fits:
        notes.append(messages.kv_cache_too_small(kv.max_model_len, kv.request_bytes, kv.available_bytes,
                                              kv_cache.estimate_max_model_len(kv.available_bytes, spec, kv.block_size,
                                                                            report.request.kv_cache_dtype,
                                                                            report.request.tp, report.request.pp,
                                                                            report.max_num_batched_tokens,
                                                                            limit=kv.max_model_len)))
    if kv.max_model_len > spec.derived_max_model_len:
        notes.append(messages.MAX_MODEL_LEN_OVER_DERIVED.format(max_model_len=kv.max_model_len,
                                                                derived=spec.derived_max_model_len))
    if kv.fits and kv.max_concurrency < min(report.max_num_seqs, 16):
        notes.append(f"only {kv.max_concurrency:.2f} full-length requests fit at once: expect preemption under "
                     "concurrency (lower max_model_len or use fp8 KV).")
    if gpu.free_bytes is not None and gpu.free_bytes < budget.requested_bytes:
        notes.append(f"GPU {gpu.index} has {format_gib(gpu.free_bytes)} GiB free, less than the "
                     f"{format_gib(budget.requested_bytes)} GiB requested: vLLM would refuse to start.")
    if any(kind in ("mamba", "linear_attention") for kind in spec.layer_types):
        notes.append("mamba / linear-attention layers keep a fixed state per request, not counted here.")
    if report.dtype == "float32" and kv_memory_given is None:
        notes.append("float32 weights: vLLM on GPU would normally run this model in bfloat16.")
    return notes
