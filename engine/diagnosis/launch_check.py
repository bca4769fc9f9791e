"""A start-up that failed with its cause cut off, sized by plan's memory model: where the paste holds the launch
(a model kvtool knows, the GPU or its memory, the flags) but not the error, the plan memory model
(kvtool.engine.sizing) says whether that launch could start. With no room for any block, or less than one
max_model_len request, that is the cause; its numbers are estimates, and the finding says so."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Observation
from kvtool.engine.diagnosis.measured import default_utilization
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.signs import STARTUP_FAILED

PLANNED = "plan memory model"  # an observation's detail: its numbers are kvtool's estimates
AFTER_KV_LINE = "failed after the KV cache line"  # an observation's detail: the refusal is inferred, not shown
PLANNED_NOTE = (
    "The paste does not show the error itself: kvtool's plan memory model sized this launch (the model, the GPU and "
    "the flags the paste states), so every number here is an estimate."
)
AFTER_KV_NOTE = (
    "The paste does not show the refusal: the start-up failed right after it printed its KV cache memory, where vLLM "
    "checks that one max_model_len request fits. kvtool does not know this model's KV bytes per token, so this is the "
    "likely cause, not a measured one."
)
NOTES = {PLANNED: PLANNED_NOTE, AFTER_KV_LINE: AFTER_KV_NOTE}  # an observation's detail: the note its finding carries


def launch_could_not_start(context: LogContext, memory: MemoryModel) -> Observation | None:
    if not _failed_alone(context) or memory.spec is None or not context.total_gpu_gib:
        return None
    kv_gib = memory.kv_budget_gib(context.total_gpu_gib, default_utilization(context))
    if kv_gib is None:
        return None
    evidence = _launch_line(context)
    numbers = {"kv_available_gib": kv_gib, "total_gpu_gib": context.total_gpu_gib}
    if kv_gib <= 0:
        return Observation("no_cache_blocks", "startup", numbers, evidence, (0, len(evidence)), PLANNED)
    limit = context.max_model_len or memory.spec.derived_max_model_len
    fits = memory.max_len_for(kv_gib, limit=limit)
    if fits is None or fits >= limit:
        return None
    numbers.update(max_model_len=limit, estimated_max_model_len=memory.round_down(fits)[0])
    return Observation("kv_cache_too_small_at_startup", "startup", numbers, evidence, (0, len(evidence)), PLANNED)


def failed_after_kv_line(context: LogContext) -> Observation | None:
    """A start-up that failed once it printed its KV cache memory, with no other error, for a model whose KV bytes per
    token kvtool does not know: the check that follows that line (one max_model_len request must fit) is the likely
    refusal, so it is named with what the paste states, as the less sure reading (AFTER_KV_LINE)."""
    if not _failed_alone(context) or not context.available_kv_gib or not context.max_model_len:
        return None
    evidence = context.evidence("available_kv_gib") or _launch_line(context)
    numbers = {"max_model_len": context.max_model_len, "kv_available_gib": context.available_kv_gib}
    return Observation("kv_cache_too_small_at_startup", "startup", numbers, evidence, (0, len(evidence)), AFTER_KV_LINE)


def _failed_alone(context: LogContext) -> bool:
    """A start-up that failed, with no error of another kind in the paste (that would be what failed)."""
    if not context.startup_failed or context.server_up:
        return False
    return all(any(marker in line for marker in STARTUP_FAILED) for line in context.errors.values())


def _launch_line(context: LogContext) -> str:
    """The line that states the launch's length (else its utilization): the evidence the estimate rests on."""
    for name in ("max_model_len", "gpu_memory_utilization"):
        if (fact := context.facts.setting(name)) is not None:
            return fact.evidence
    return ""
