"""CUDA out-of-memory: at start-up (by phase), while serving, or at a stage the input does not tell."""

import math
from dataclasses import replace

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain_graphs import graph_fixes
from kvtool.engine.diagnosis.explain_kv import smaller_profiling_batch
from kvtool.engine.diagnosis.findings import Alternative, Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import MEASURED, default_utilization, run_budget
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.defaults import ASSUMED_MAX_NUM_BATCHED_TOKENS, ASSUMED_MAX_NUM_SEQS

ALLOC_CONF = Fix(
    "let PyTorch grow segments instead of fragmenting them",
    flag="PYTORCH_CUDA_ALLOC_CONF",
    value="expandable_segments:True",
)
HEADROOM_GIB = 0.5
OTHERS_SHARE = 0.1  # another process holding this share of the GPU is the cause
# a process holding this share of the GPU, failing on an allocation of at most SMALL_ALLOCATION of it, is serving
FULL_GPU, SMALL_ALLOCATION = 0.95, 0.02
LOAD = ("num_running", "num_waiting", "concurrency", "kv_cache_usage_percent")
WHERE = {"runtime": "while serving", "startup": "at start-up", "unknown": "(stage unknown)"}
SERVING_WHY = (
    'if the server had already started serving ("Application startup complete", request or stats lines before '
    "the error), the memory ran out while serving: the KV cache and the running batch left too little headroom"
)
STAGE_UNKNOWN_NOTE = (
    "Nothing in the input says whether the server had started serving, so the stage is unknown: the fixes "
    "above are for a start-up failure, those for one while serving are under cuda_oom_runtime."
)


def cuda_oom(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = Numbers(obs.numbers)
    _this_process(n)
    if obs.stage == "unknown" and (why := _while_serving(n, context)):
        obs = replace(obs, category="cuda_oom_runtime", stage="runtime", stage_evidence=why)
    _launch_numbers(n, context)
    if "dummy_requests" in n:  # vLLM warms the sampler up with max_num_seqs dummy requests
        n.setdefault("max_num_seqs", n["dummy_requests"])
    phase = obs.detail
    summary = f"CUDA ran out of memory {f'during {phase}' if phase else WHERE[obs.stage]}"
    if "tried_to_allocate_gib" in n:
        summary += f" asking for {_gib(n['tried_to_allocate_gib'])} GiB"
    if "free_gib" in n:
        summary += f" with {_gib(n['free_gib'])} GiB free"
    fixes = _fixes(obs.stage, phase, n, context, memory)
    notes = [_stage_note(obs)]
    if _others_hold_memory(n):
        notes.append(
            f"This process uses {_gib(n['this_process_gib'])} of {_gib(n['total_gib'])} GiB: "
            "other processes hold the rest."
        )
    if n.get("reserved_unallocated_gib", 0) >= n.get("tried_to_allocate_gib", math.inf):
        fixes.append(ALLOC_CONF)
    alternatives = []
    if obs.stage == "unknown":
        alternatives.append(Alternative("cuda_oom_runtime", SERVING_WHY, _runtime_fixes(n, context)))
    finding = Finding(
        obs.category,
        obs.stage,
        summary + ".",
        n,
        fixes,
        obs.evidence,
        obs.span,
        notes,
        stage_evidence=obs.stage_evidence,
        alternatives=alternatives,
    )
    if n.get("total_gib") and n.get("other_process_gib", 0) >= OTHERS_SHARE * n["total_gib"]:
        return _held_by_another(finding)
    return finding


def _this_process(n: Numbers) -> None:
    """PyTorch names the failing process by its PID where it cannot tell it is itself (another PID namespace: a
    container): a named process with no "this process" figure beside it is vLLM itself."""
    if "other_process_gib" in n and "this_process_gib" not in n:
        n["this_process_gib"] = n.pop("other_process_gib")


def _while_serving(n: Numbers, context: LogContext) -> str | None:
    """Why an out-of-memory error nothing else places happened while serving, or None: the paste tells a load
    (requests running or waiting, a client's concurrency, a KV cache in use), or a small allocation failed in a
    process that already holds nearly the whole GPU (start-up had taken its whole budget: weights, KV cache)."""
    load = next((f for name in LOAD for f in context.facts.of(name) if f.value), None)
    if load is not None:
        return f"the load the paste tells: {load.evidence.strip()[:160]}"
    if context.serving_told:
        return "the paste says it was serving"
    total, held, asked = n.get("total_gib"), n.get("this_process_gib"), n.get("tried_to_allocate_gib")
    if total and held and asked is not None and held >= FULL_GPU * total and asked <= SMALL_ALLOCATION * total:
        return f"a {_gib(asked)} GiB allocation failed with {_gib(held)} of {_gib(total)} GiB already held"
    return None


def _launch_numbers(n: Numbers, context: LogContext) -> None:
    for name in ("max_model_len", "gpu_memory_utilization", "tensor_parallel_size"):
        if name not in n and (value := getattr(context, name)) is not None:
            n.put(name, value, MEASURED)


def _held_by_another(oom: Finding) -> Finding:
    """PyTorch names another process that holds much of the GPU: that process is the cause, the OOM the symptom."""
    n = oom.numbers
    other, total = n["other_process_gib"], n["total_gib"]
    n["max_gpu_memory_utilization"] = math.floor((total - other) / total * 100) / 100
    summary = (
        f"Another process holds {_gib(other)} of the GPU's {_gib(total)} GiB, so vLLM ran out of memory "
        f"({oom.summary[0].lower() + oom.summary[1:-1]})."
    )
    fixes = [
        Fix("stop the other process on this GPU (see nvidia-smi) or pick a free GPU", flag="CUDA_VISIBLE_DEVICES"),
        Fix(
            "or ask only for what the other process leaves",
            flag="--gpu-memory-utilization",
            value=n["max_gpu_memory_utilization"],
        ),
    ]
    why = "if the other process is meant to share the GPU, this is vLLM's own share running out"
    alternatives = [Alternative(oom.category, why, oom.fixes), *oom.alternatives]
    return replace(oom, category="gpu_memory_held_by_others", summary=summary, fixes=fixes, alternatives=alternatives)


def _fixes(stage: str, phase: str | None, n: dict, context: LogContext, memory: MemoryModel) -> list[Fix]:
    if stage == "runtime":
        return _runtime_fixes(n, context)
    if phase == "KV cache allocation":  # the weights fitted: the cache asked for more than was left
        return [
            _lower_utilization(n, context),
            Fix("shard over more GPUs", flag="--tensor-parallel-size", value=memory.tp * 2),
        ]
    return _phase_fixes("sampler warm-up" if phase == "pooler warm-up" else phase, n, context, memory)


def _stage_note(obs: Observation) -> str:
    if obs.stage_evidence is None:
        return STAGE_UNKNOWN_NOTE
    where = "while serving" if obs.stage == "runtime" else "at start-up"
    return f"Read as {where} from: {obs.stage_evidence.strip()[:200]}"


def _phase_fixes(phase: str | None, n: dict, context: LogContext, memory: MemoryModel) -> list[Fix]:
    if phase == "weight loading":
        return [
            Fix("the weights alone do not fit: shard them", flag="--tensor-parallel-size", value=memory.tp * 2),
            Fix("serve a quantized checkpoint (AWQ, GPTQ, FP8)", flag="--quantization", value=None),
        ]
    if phase == "sampler warm-up":
        dummy = n.get("dummy_requests") or context.max_num_seqs or ASSUMED_MAX_NUM_SEQS
        return [
            Fix("warm up (and serve) fewer sequences at once", flag="--max-num-seqs", value=max(1, dummy // 2)),
            _lower_utilization(n, context),
        ]
    if phase == "CUDA graph capture":
        return graph_fixes(context) + [
            Fix("skip CUDA graphs (slower decode, no graph memory)", flag="--enforce-eager", value=True),
            _lower_utilization(n, context),
            Fix(
                "capture graphs for fewer batch sizes",
                flag="--max-num-seqs",
                value=max(1, (context.max_num_seqs or ASSUMED_MAX_NUM_SEQS) // 2),
            ),
        ]
    return [
        smaller_profiling_batch(n, memory, run_budget(context, memory)),
        Fix(
            "run fewer sequences at once",
            flag="--max-num-seqs",
            value=max(1, (context.max_num_seqs or ASSUMED_MAX_NUM_SEQS) // 2),
        ),
        _lower_utilization(n, context),
    ]


def _runtime_fixes(n: dict, context: LogContext) -> list[Fix]:
    return [
        _lower_utilization(n, context),
        Fix(
            "run fewer sequences at once",
            flag="--max-num-seqs",
            value=max(1, (context.max_num_seqs or ASSUMED_MAX_NUM_SEQS) // 2),
        ),
        Fix(
            "prefill in smaller chunks",
            flag="--max-num-batched-tokens",
            value=max(512, (context.max_num_batched_tokens or ASSUMED_MAX_NUM_BATCHED_TOKENS) // 2),
        ),
    ]


def _lower_utilization(n: dict, context: LogContext) -> Fix:
    """Leave the failed allocation (plus headroom) outside vLLM's budget."""
    total = n.get("total_gib") or context.total_gpu_gib
    current = default_utilization(context)
    if not total or total <= 0 or "tried_to_allocate_gib" not in n:
        return Fix(
            "leave more memory outside vLLM's budget", flag="--gpu-memory-utilization", value=round(current - 0.05, 2)
        )
    step = math.ceil((n["tried_to_allocate_gib"] + HEADROOM_GIB) / total * 100) / 100
    n["gpu_memory_utilization_suggested"] = round(max(0.05, current - step), 2)
    return Fix(
        f"leave {_gib(n['tried_to_allocate_gib'] + HEADROOM_GIB)} GiB outside vLLM's budget",
        flag="--gpu-memory-utilization",
        value=n["gpu_memory_utilization_suggested"],
    )


def _others_hold_memory(n: dict) -> bool:
    used_by_us, total, free = n.get("this_process_gib"), n.get("total_gib"), n.get("free_gib", 0)
    return bool(used_by_us and total and total - free - used_by_us > 0.1 * total)


def _gib(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")
