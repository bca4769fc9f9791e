"""Preemption and a KV cache under pressure: vLLM's preemption warnings and counters, and the periodic stats
line, read as a whole (a cache 90 % full with requests waiting, requests swapped out, or a prefix cache hit rate
that prompts sharing no prefix can only reach by recomputing preempted requests)."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import MEASURED, default_utilization
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.recognisers import FULL_PERCENT, NEAR_FULL_PERCENT, PRESSURE_PERCENT

PRIORITY_NOTE = (
    "Priority scheduling is on: vLLM also preempts lower-priority requests to admit higher-priority ones, with KV "
    "memory to spare, under the same warning; more KV memory does not stop those."
)


def kv_pressure(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    """Preemption or a near-full cache: more requests run than the KV cache holds."""
    n = Numbers(obs.numbers)
    if obs.category == "preemption" and "num_preemptions" in n:
        summary = (
            f"Requests were preempted ({int(n['num_preemptions'])} so far): the KV cache filled up and running "
            "sequences were evicted and recomputed, which costs latency."
        )
    elif obs.category == "preemption":
        summary = (
            "The KV cache is full for the load: running sequences are evicted and recomputed (vLLM's V1 preempts "
            "without a warning), which costs latency."
        )
    else:
        usage = n.get("kv_cache_usage_percent", n.get("kv_cache_usage", 0) * 100)
        summary = f"The KV cache reached {usage:.1f}% use: new requests wait and preemption is next."
    fixes = _pressure_fixes(n, context, memory)
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span, _notes(obs.category, context))


def _notes(category: str, context: LogContext) -> list[str]:
    return [PRIORITY_NOTE] if context.priority_scheduling and category == "preemption" else []


def _pressure_fixes(n: dict, context: LogContext, memory: MemoryModel) -> list[Fix]:
    tokens = context.kv_cache_tokens or (context.num_gpu_blocks and memory.kv_tokens(context.num_gpu_blocks))
    fixes = []
    if tokens and context.max_model_len:
        n.put("kv_cache_tokens", tokens, MEASURED)  # the start-up's, its tightest rank's
        n["max_num_seqs_without_preemption"] = max(1, tokens // context.max_model_len)
        fixes.append(
            Fix(
                "cap concurrency at what the cache holds at full length",
                flag="--max-num-seqs",
                value=n["max_num_seqs_without_preemption"],
            )
        )
    elif "num_running" in n:
        fixes.append(
            Fix("run fewer sequences at once", flag="--max-num-seqs", value=max(1, int(n["num_running"] * 3 // 4)))
        )
    if (current := default_utilization(context)) < 0.95:
        fixes.append(
            Fix(
                "give the KV cache more of the GPU",
                flag="--gpu-memory-utilization",
                value=round(min(0.95, current + 0.05), 2),
            )
        )
    if (factor := memory.fp8_factor()) > 1:
        action = f"store the KV cache in fp8: {factor}x the tokens"
        if tokens:
            n["fp8_kv_cache_tokens"] = tokens * factor
            action += f" ({tokens * factor} instead of {tokens})"
        fixes.append(Fix(action, flag="--kv-cache-dtype", value="fp8"))
    fixes.append(Fix("shard over more GPUs for more KV memory", flag="--tensor-parallel-size", value=memory.tp * 2))
    return fixes


def stats_pressure(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding | None:
    """A stats line's reading: preemption where it shows, a full cache where only that does, else nothing."""
    n = Numbers(obs.numbers)
    usage, waiting = n["kv_cache_usage_percent"], n.get("num_waiting", 0)
    hit_rate, swapped = n.get("prefix_cache_hit_rate_percent"), n.get("num_swapped", 0)
    if swapped > 0:
        why = f"{swapped} requests were swapped out to CPU memory: preempted"
    elif waiting > 0 and usage > PRESSURE_PERCENT:
        why = f"{waiting} requests wait while the KV cache is {usage:.1f}% full: running ones are being preempted"
    elif usage >= FULL_PERCENT:
        why = f"the KV cache is {usage:.1f}% full, so the next token of a running request finds no free block"
    elif waiting > 0 and hit_rate and context.random_prompts:
        why = (
            f"a prefix cache hit rate of {hit_rate:.1f}% on random prompts, which share no prefix, comes from "
            f"preempted requests being recomputed ({waiting} requests wait, the cache is {usage:.1f}% full)"
        )
    elif usage >= NEAR_FULL_PERCENT:
        return kv_pressure(obs, context, memory)
    else:
        return None
    summary = f"The KV cache is too small for the load: {why}; each preemption costs a recomputation."
    fixes = _pressure_fixes(n, context, memory)
    return Finding("preemption", obs.stage, summary, n, fixes, obs.evidence, obs.span, _notes("preemption", context))
