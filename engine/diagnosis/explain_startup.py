"""Start-up findings: there is no room for any block, or other processes hold the memory the utilization asks
for (the KV cache too small for one max_model_len request: explain_kv.py)."""

import math

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain_kv import smaller_profiling_batch
from kvtool.engine.diagnosis.findings import Alternative, Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import DERIVED, ESTIMATED, MEASURED, run_budget
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.defaults import HIGHEST_ADVISED_UTILIZATION
from kvtool.engine.sizing.memory_budget import utilization_for

LISTED_PROCESS_GIB = 1.0  # a process holding less is a CUDA context, not a workload
HELD_WHY = (
    "if the process nvidia-smi lists with {held} GiB is not this vLLM: a release without the start-up check of free "
    "memory (before 0.9.2) counts what other processes hold against gpu_memory_utilization x total, which leaves "
    "nothing for the KV cache"
)
UNIFIED_SUMMARY = (
    "On a unified-memory device the operating system, other programs and any firmware carve-out share the memory "
    "the GPU sees: only {free} of {total} GiB is free at start-up, less than gpu_memory_utilization {utilization} "
    "asks for. The largest utilization that fits is what is free over the total."
)


def no_cache_blocks(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = Numbers(obs.numbers)
    summary = (
        "Nothing is left for the KV cache: the weights and the profiled activations already fill "
        "gpu_memory_utilization x total memory."
    )
    budget = run_budget(context, memory)
    if "kv_available_gib" not in n and context.available_kv_gib is not None:
        n.put("kv_available_gib", context.available_kv_gib, MEASURED)
    if "gpu_memory_utilization" not in n and context.gpu_memory_utilization is not None:
        n.put("gpu_memory_utilization", context.gpu_memory_utilization, MEASURED)
    fixes = [fix for fix in (_utilization_for_one_request(n, context, memory, budget),) if fix]
    fixes += [
        smaller_profiling_batch(n, memory, budget),
        Fix("shard the weights over more GPUs", flag="--tensor-parallel-size", value=memory.tp * 2),
        Fix("serve a quantized checkpoint (AWQ, GPTQ, FP8) to shrink the weights", flag="--quantization", value=None),
    ]
    alternatives = [alternative] if (alternative := _held_by_a_listed_process(n, context)) else []
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span, alternatives=alternatives)


def _held_by_a_listed_process(n: Numbers, context: LogContext) -> Alternative | None:
    """A process nvidia-smi lists with memory of its own: if it is not this vLLM, it took the budget."""
    held = context.facts.largest("process_gib")
    if held is None or held.value < LISTED_PROCESS_GIB:
        return None
    n.put("other_process_gib", held.value, MEASURED)
    why = HELD_WHY.format(held=held.value)
    fixes = [Fix("stop it, or give vLLM a GPU of its own", flag="CUDA_VISIBLE_DEVICES")]
    return Alternative("gpu_memory_held_by_others", why, fixes)


def _utilization_for_one_request(n: Numbers, context: LogContext, memory: MemoryModel, budget) -> Fix | None:
    """The utilization whose share holds what the run took before the KV cache (utilization x total less the KV
    budget it was left, as vLLM measured them; else the parts it printed) and one max_model_len request."""
    total, before_kv = budget.total_gib, _before_kv_cache(n, context, budget)
    if not total or before_kv is None:
        current = budget.utilization
        if current >= HIGHEST_ADVISED_UTILIZATION:
            return None
        action = "give vLLM more of the GPU (the total and the profile would say how much)"
        more = round(min(HIGHEST_ADVISED_UTILIZATION, current + 0.05), 2)
        return Fix(action, flag="--gpu-memory-utilization", value=more)
    n.put("total_gpu_gib", total, budget.sources["total_gpu_gib"])
    n.put("budget_gib", round(budget.utilization * total, 2), DERIVED)
    # the share of the GPU that holds what came before the KV cache: below it there is none at all
    n.put("gpu_memory_utilization_for_no_kv", round(before_kv / total, 4), DERIVED)
    one_request = (context.max_model_len and memory.needed_gib(context.max_model_len)) or 0
    inputs = {budget.sources["total_gpu_gib"], budget.sources["gpu_memory_utilization"]}
    target = utilization_for(before_kv + one_request, total)
    n.put("gpu_memory_utilization_needed", target, ESTIMATED if ESTIMATED in inputs or not one_request else DERIVED)
    if target > HIGHEST_ADVISED_UTILIZATION:
        return None
    return Fix("raise the utilization so one max_model_len request fits", flag="--gpu-memory-utilization", value=target)


def _before_kv_cache(n: Numbers, context: LogContext, budget) -> float | None:
    """What the run took before the KV cache, in GiB: its budget less the KV cache it was left, else the sum of
    the parts it printed (weights, activation peak, non-torch memory, the graphs set aside)."""
    parts = {"weights_gib": context.weights_gib, "activation_peak_gib": context.activation_peak_gib}
    parts["non_torch_gib"] = context.non_torch_gib
    printed = all(part is not None for part in parts.values())
    for name, value in parts.items() if printed else ():
        n.put(name, value, MEASURED)
    if "kv_available_gib" in n and budget.total_gib:
        before_kv = budget.utilization * budget.total_gib - n["kv_available_gib"]
    elif printed:
        before_kv = sum(parts.values()) + budget.graphs_gib
    else:
        return None
    return n.put("before_kv_cache_gib", round(before_kv, 2), DERIVED)


def gpu_memory_held_by_others(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = Numbers(obs.numbers)
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
    others = Fix(
        "stop the other processes on this GPU (see nvidia-smi) or pick a free GPU", flag="CUDA_VISIBLE_DEVICES"
    )
    if context.unified_memory:
        summary = UNIFIED_SUMMARY.format(free=free, total=total, utilization=n["gpu_memory_utilization"])
        others = Fix("or free memory for the GPU: close programs, shrink a firmware carve-out", flag=None)
    fixes = [
        Fix(
            "ask only for what is free" + _what_fits(n, context, memory),
            flag="--gpu-memory-utilization",
            value=n["max_gpu_memory_utilization"],
        ),
        others,
    ]
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span)


def _what_fits(n: Numbers, context: LogContext, memory: MemoryModel) -> str:
    """With the model known, what the smaller budget still serves (the plan memory model's estimate: vLLM stops
    before it measures anything)."""
    kv_gib = memory.kv_budget_gib(n["total_gib"], n["max_gpu_memory_utilization"])
    if kv_gib is None:
        return ""
    n.put("kv_budget_at_max_utilization_gib", kv_gib, ESTIMATED)
    fits = memory.max_len_for(kv_gib)
    if not fits:
        return f": {memory.spec.name} then does not fit at all"
    n.put("max_model_len_at_max_utilization", memory.round_down(fits)[0], ESTIMATED)
    return f": about {kv_gib} GiB for the KV cache, max_model_len {n['max_model_len_at_max_utilization']} starts"
