"""Start-up findings: the KV cache cannot hold one max_model_len request, there is no room for any
block, or other processes hold the memory the utilization asks for."""

import math

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.defaults import ASSUMED_MAX_NUM_BATCHED_TOKENS, HIGHEST_ADVISED_UTILIZATION
from kvtool.engine.sizing.memory_budget import utilization_for
from kvtool.engine.sizing.vllm_versions import default_gpu_memory_utilization


def default_utilization(context: LogContext) -> float:
    """The utilization the log names, else vLLM's default for the log's version."""
    return context.gpu_memory_utilization or default_gpu_memory_utilization(context.version or "0.0")


def kv_cache_too_small(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    limit = n.setdefault("max_model_len", context.max_model_len)
    if "kv_cache_tokens" in n and limit:
        n["kv_shortfall_tokens"] = limit - n["kv_cache_tokens"]
    estimate = _estimate(n, memory)
    summary = f"The KV cache cannot hold one request of max_model_len {limit} tokens, so the engine refuses to start."
    fixes = []
    if estimate:
        n["estimated_max_model_len"] = estimate
        n["max_model_len_block"], n["max_model_len_1024"] = memory.round_down(estimate)
        summary += f" About {estimate} tokens fit."
        fixes.append(Fix("lower the context to what fits", flag="--max-model-len", value=n["max_model_len_1024"]))
    fixes += _more_kv_memory(n, context, memory)
    fixes.append(smaller_profiling_batch(n, context))
    fixes += _fp8(n, memory, limit)
    fixes.append(_tensor_parallel(n, memory))
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span)


def smaller_profiling_batch(n: dict, context: LogContext) -> Fix:
    """The profiling run's activation peak, which grows with max_num_batched_tokens, is taken from the KV budget."""
    batched = context.max_num_batched_tokens or ASSUMED_MAX_NUM_BATCHED_TOKENS
    action = "shrink the profiling batch: its activation peak comes out of the KV cache budget"
    if context.activation_peak_gib:
        n["activation_peak_gib"] = context.activation_peak_gib
        action += f" (about {round(context.activation_peak_gib / 2, 2)} GiB back at half the batch)"
    return Fix(action, flag="--max-num-batched-tokens", value=max(512, batched // 2))


def _estimate(n: dict, memory: MemoryModel) -> int | None:
    if n.get("estimated_max_model_len"):
        return n["estimated_max_model_len"]
    if "kv_available_gib" in n and (fits := memory.max_len_for(n["kv_available_gib"], limit=n["max_model_len"])):
        return fits
    if "kv_cache_tokens" in n:  # v0 and the computed case: the whole cache in tokens
        return n["kv_cache_tokens"]
    if n.get("kv_needed_gib"):  # 0.8.5 prints no estimate: full attention scales linearly
        return (
            int(n["max_model_len"] * n["kv_available_gib"] / n["kv_needed_gib"])
            // memory.block_size
            * memory.block_size
        )
    return None


def _more_kv_memory(n: dict, context: LogContext, memory: MemoryModel) -> list[Fix]:
    needed, available = n.get("kv_needed_gib"), n.get("kv_available_gib")
    if needed is None and memory.spec and context.available_kv_gib is not None:
        needed, available = memory.needed_gib(n["max_model_len"]), context.available_kv_gib
    total = context.total_gpu_gib
    if needed is not None and available is not None:
        n["kv_shortfall_gib"] = round(needed - available, 2)
    if "kv_shortfall_gib" not in n or not total or total <= 0:
        more = f"{n['kv_shortfall_gib']} GiB " if "kv_shortfall_gib" in n else ""
        return [
            Fix(
                f"give the KV cache {more}more of the GPU (give --gpu-mem to compute the value)",
                flag="--gpu-memory-utilization",
                value=None,
            )
        ]
    current = default_utilization(context)
    target = utilization_for(current * total + needed - available, total)
    n["gpu_memory_utilization_needed"] = target
    if target > HIGHEST_ADVISED_UTILIZATION:  # no headroom left for anything else: not a fix
        return []
    return [
        Fix(
            f"give the KV cache {n['kv_shortfall_gib']} GiB more of the {total} GiB GPU",
            flag="--gpu-memory-utilization",
            value=target,
        )
    ]


def _fp8(n: dict, memory: MemoryModel, limit: int) -> list[Fix]:
    factor = memory.fp8_factor()
    if factor <= 1:
        return []
    n["fp8_kv_token_factor"] = factor
    if "kv_available_gib" in n and (fits := memory.max_len_for(n["kv_available_gib"], "fp8")):
        n["fp8_estimated_max_model_len"] = fits
    elif n.get("estimated_max_model_len"):
        n["fp8_estimated_max_model_len"] = min(n["estimated_max_model_len"] * factor, limit)
    fp8_len = n.get("fp8_estimated_max_model_len", 0)
    starts = (
        f"max_model_len {limit} starts" if fp8_len >= limit else f"max_model_len {memory.round_down(fp8_len)[0]} starts"
    )
    action = f"store the KV cache in fp8: the same memory holds {factor}x the tokens"
    return [Fix(f"{action}: {starts}" if fp8_len else action, flag="--kv-cache-dtype", value="fp8")]


def _tensor_parallel(n: dict, memory: MemoryModel) -> Fix:
    tp = memory.tp * 2
    split = (
        "the weights (MLA's latent KV is not split)"
        if memory.spec and memory.spec.is_mla
        else "the weights and of the KV heads"
    )
    action = f"shard the model over {tp} GPUs: each keeps 1/{tp} of {split}"
    if memory.spec and "kv_available_gib" in n and (fits := memory.max_len_for(n["kv_available_gib"], tp=tp)):
        n[f"tp{tp}_estimated_max_model_len"] = fits
        action += f" (at least {memory.round_down(fits)[0]} tokens fit)"
    return Fix(action, flag="--tensor-parallel-size", value=tp)


def no_cache_blocks(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    summary = (
        "Nothing is left for the KV cache: the weights and the profiled activations already fill "
        "gpu_memory_utilization x total memory."
    )
    fixes = []
    for name, known in (
        ("kv_available_gib", context.available_kv_gib),
        ("gpu_memory_utilization", context.gpu_memory_utilization),
    ):
        if known is not None:
            n.setdefault(name, known)
    parts = [context.weights_gib, context.activation_peak_gib, context.non_torch_gib]
    if context.total_gpu_gib and all(part is not None for part in parts):
        n.update(
            total_gpu_gib=context.total_gpu_gib,
            weights_gib=parts[0],
            activation_peak_gib=parts[1],
            non_torch_gib=parts[2],
        )
        one_request = (context.max_model_len and memory.needed_gib(context.max_model_len)) or 0
        n["gpu_memory_utilization_needed"] = utilization_for(sum(parts) + one_request, context.total_gpu_gib)
        if n["gpu_memory_utilization_needed"] <= HIGHEST_ADVISED_UTILIZATION:
            fixes.append(
                Fix(
                    "raise the utilization so one max_model_len request fits",
                    flag="--gpu-memory-utilization",
                    value=n["gpu_memory_utilization_needed"],
                )
            )
    elif (current := default_utilization(context)) < HIGHEST_ADVISED_UTILIZATION:
        fixes.append(
            Fix(
                "give vLLM more of the GPU (the total and the profile would say how much)",
                flag="--gpu-memory-utilization",
                value=round(min(HIGHEST_ADVISED_UTILIZATION, current + 0.05), 2),
            )
        )
    fixes += [
        smaller_profiling_batch(n, context),
        Fix("shard the weights over more GPUs", flag="--tensor-parallel-size", value=memory.tp * 2),
        Fix("serve a quantized checkpoint (AWQ, GPTQ, FP8) to shrink the weights", flag="--quantization", value=None),
    ]
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span)


def gpu_memory_held_by_others(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    if "free_gib" not in n:  # "Error in memory profiling": free memory grew while vLLM measured it
        if "initial_free_gib" in n:
            n["released_during_profiling_gib"] = round(n["current_free_gib"] - n["initial_free_gib"], 2)
        elif "initial_used_gib" in n:
            n["released_during_profiling_gib"] = round(n["initial_used_gib"] - n["current_used_gib"], 2)
        summary = "Another process released GPU memory while vLLM was profiling, so the measurement is wrong."
        return Finding(
            obs.category,
            obs.stage,
            summary,
            n,
            [Fix("give vLLM a GPU of its own", flag="CUDA_VISIBLE_DEVICES", value=None)],
            obs.evidence,
            obs.span,
        )
    free, total = n["free_gib"], n["total_gib"]
    n["held_by_others_gib"] = round(total - free, 2)
    n["shortfall_gib"] = round(n["requested_gib"] - free, 2)
    n["max_gpu_memory_utilization"] = math.floor(free / total * 100) / 100 if total > 0 else 0.0
    summary = (
        f"Only {free} of {total} GiB is free at start-up: other processes hold {n['held_by_others_gib']} GiB, "
        f"but gpu_memory_utilization {n['gpu_memory_utilization']} asks for {n['requested_gib']} GiB."
    )
    fixes = [
        Fix(
            "ask only for what is free" + _what_fits(n, context, memory),
            flag="--gpu-memory-utilization",
            value=n["max_gpu_memory_utilization"],
        ),
        Fix(
            "stop the other processes on this GPU (see nvidia-smi) or pick a free GPU",
            flag="CUDA_VISIBLE_DEVICES",
            value=None,
        ),
    ]
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span)


def _what_fits(n: dict, context: LogContext, memory: MemoryModel) -> str:
    """With the model known, what the smaller budget still serves (plan memory model)."""
    kv_gib = memory.kv_budget_gib(n["total_gib"], n["max_gpu_memory_utilization"])
    if kv_gib is None:
        return ""
    n["kv_budget_at_max_utilization_gib"] = kv_gib
    fits = memory.max_len_for(kv_gib)
    if not fits:
        return f": {memory.spec.name} then does not fit at all"
    n["max_model_len_at_max_utilization"] = memory.round_down(fits)[0]
    return f": about {kv_gib} GiB for the KV cache, max_model_len {n['max_model_len_at_max_utilization']} starts"
