"""What an answer from a start-up log says beside its figures: what the log printed of its KV cache, and
what to know (a GPU memory solved from the log, another GPU, a config that disagrees with the log)."""

from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import DERIVED, MEASURED, LogBudget
from kvtool.engine.startup_log.reader import VllmStartupLog

AGREES = 0.01  # the KV arithmetic on the log's own budget lands this close to what the log printed
GPU_DERIVED = "The log prints no GPU memory: {gib:.2f} GiB is solved from its budget with the estimated parts."
GPU_GIVEN = "The log ran on {log:.2f} GiB; answered for the given {given:.2f} GiB."
OVERDRAWN = (
    "The log's printed figures take more than {utilization} x {gib:.2f} GiB: the GPU has more memory than that; "
    "give it with --gpu-mem."
)
DISAGREES = (
    "The log printed {printed} for its {gib:.2f} GiB of KV cache where the model's config gives {planned}: "
    "check that --model is the model the log ran (if it is, kvtool's KV arithmetic misses its layout)."
)


def printed_figures(log: VllmStartupLog) -> dict[str, float]:
    """The log's KV-cache figures as it printed them (the tightest rank's; a failure's where it stopped)."""
    memory, failure = log.memory, log.failure
    figures = {
        "available_kv_cache_gib": memory.available_kv_cache_memory_gib
        or (failure and failure.available_kv_cache_memory_gib),
        "kv_cache_tokens": memory.kv_cache_size_tokens or (failure and failure.kv_cache_size_tokens),
        "num_gpu_blocks": memory.num_gpu_blocks,
        "max_concurrency": memory.max_concurrency,
        "estimated_max_model_len": failure and failure.estimated_max_model_len,
    }
    return {name: value for name, value in figures.items() if value is not None}


def gpu_notes(measured: LogBudget, gpu: GpuInfo, answer_gpu: GpuInfo) -> list[str]:
    """A GPU memory solved from the log, another GPU answered for, a GPU too small for the log's figures."""
    notes, budget = [], measured.budget
    if measured.sources["total_bytes"] == DERIVED:
        notes.append(GPU_DERIVED.format(gib=budget.total_bytes / GiB))
    if answer_gpu.total_bytes != gpu.total_bytes:
        notes.append(GPU_GIVEN.format(log=gpu.total_bytes / GiB, given=answer_gpu.total_bytes / GiB))
    if any(budget_part < 0 for budget_part in measured.figures(DERIVED).values()):
        notes.append(OVERDRAWN.format(utilization=budget.gpu_memory_utilization, gib=budget.total_bytes / GiB))
    return notes


def kv_notes(log: VllmStartupLog, cache: KVCacheSpec, measured: LogBudget, max_model_len: int) -> list[str]:
    """Whether the model's KV arithmetic gives, for the log's own KV cache, what the log printed."""
    kv = measured.budget.kv_cache_bytes
    if measured.sources["kv_cache_bytes"] != MEASURED or kv <= 0:
        return []
    planned, printed = cache.plan(kv, max_model_len), printed_figures(log)
    pairs = (
        ("kv_cache_tokens", planned.kv_cache_tokens, "{:,} tokens"),
        ("max_concurrency", planned.max_concurrency, "{:.2f}x"),
    )
    for name, value, unit in pairs:
        if name in printed and abs(value / printed[name] - 1) > AGREES:
            return [DISAGREES.format(printed=unit.format(printed[name]), gib=kv / GiB, planned=unit.format(value))]
    return []
