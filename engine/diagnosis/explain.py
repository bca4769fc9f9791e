"""From observations to findings: each category's explainer, plus the failures only the log's
numbers reveal (a KV cache smaller than max_model_len, a negative KV budget)."""

from dataclasses import replace

from kvtool.engine.diagnosis import (
    explain_budget,
    explain_config,
    explain_kv,
    explain_length,
    explain_pressure,
    explain_runtime,
    explain_startup,
    explain_truncation,
    told,
    wordings,
)
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.errors import outranked
from kvtool.engine.diagnosis.explain_graphs import graph_budget, warned_graphs
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES, NOT_POSITIVE, Finding, Numbers, Observation
from kvtool.engine.diagnosis.launch_check import NOTES, PLANNED, failed_after_kv_line, launch_could_not_start
from kvtool.engine.diagnosis.measured import DERIVED, ESTIMATED, MEASURED
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.rules import client_literals, guessed, rule_observations, vetoed
from kvtool.engine.diagnosis.settings import with_settings
from kvtool.engine.diagnosis.startup import with_failure

ALL_NOTES = NOTES | told.NOTES  # an observation's detail: the note its finding carries

EXPLAINERS = {
    "request_too_long": explain_length.request_too_long,
    "max_tokens_default_truncation": explain_truncation.default_truncation,
    "kv_cache_too_small_at_startup": explain_kv.kv_cache_too_small,
    "no_cache_blocks": explain_startup.no_cache_blocks,
    "gpu_memory_held_by_others": explain_startup.gpu_memory_held_by_others,
    "cuda_oom_startup": explain_runtime.cuda_oom,
    "cuda_oom_runtime": explain_runtime.cuda_oom,
    "preemption": explain_pressure.kv_pressure,
    "kv_cache_near_full": explain_pressure.kv_pressure,
    "batched_tokens_lt_model_len": explain_budget.batched_tokens_lt_model_len,
    "batched_tokens_lt_num_seqs": explain_config.batched_tokens_lt_num_seqs,
    "max_model_len_above_derived": explain_config.max_model_len_above_derived,
    "missing_chat_template": explain_config.missing_chat_template,
    "tool_choice_auto_without_flags": explain_config.tool_choice_auto_without_flags,
    "model_not_found": explain_config.model_not_found,
    NOT_POSITIVE: explain_config.max_tokens_not_positive,
    # (category, detail): a wording that needs its own explainer
    ("request_too_long", wordings.PROMPT_LIMIT): explain_budget.prompt_limit,
    ("batched_tokens_lt_model_len", wordings.MULTIMODAL_PROFILING): explain_budget.profiling_too_short,
    ("batched_tokens_lt_model_len", wordings.SPECULATIVE): explain_budget.no_tokens_to_schedule,
    ("batched_tokens_lt_model_len", wordings.MULTIMODAL_ITEM): explain_budget.item_too_large,
    ("kv_cache_near_full", wordings.STATS_LINE): explain_pressure.stats_pressure,
}
# read from several kinds of line, reported once: the first, with the others' numbers
ONE_FINDING = ("preemption", "max_tokens_default_truncation")


def explain(observations: list[Observation], context: LogContext, memory: MemoryModel) -> list[Finding]:
    kept = client_literals(vetoed(guessed(observations, context), context), context)
    observations = vetoed(kept + rule_observations(observations, context), context)
    observations = observations + inferred_observations(observations, context, memory)
    findings = []
    for obs in observations:
        obs = replace(obs, numbers=with_failure(obs.numbers, obs.category, context.startup))
        try:
            finding = EXPLAINERS.get((obs.category, obs.detail), EXPLAINERS[obs.category])(obs, context, memory)
        except (ArithmeticError, ValueError, KeyError):  # numbers no real server prints (0 GiB GPUs, 1e308 tokens)
            finding = Finding(
                obs.category,
                obs.stage,
                "Recognised, but its numbers are out of range, so no fix is computed.",
                Numbers(obs.numbers),
                [],
                obs.evidence,
                obs.span,
            )
        if finding is None:  # read, but the log as a whole says it is no failure
            continue
        if obs.count > 1:
            finding.numbers["occurrences"] = obs.count
        if obs.detail in ALL_NOTES:
            finding.notes.append(ALL_NOTES[obs.detail])
        finding = graph_budget(finding, context, memory)
        with_settings(finding, context)
        finding.sources = _sources(finding.numbers, obs)
        findings.append(finding)
    return outranked(_once(findings), context.errors)


def _sources(numbers: dict, obs: Observation) -> dict[str, str]:
    """Each number's source: the explainer's where it gave one, else measured (read, or a count of what was read)
    or derived (computed from those)."""
    known = getattr(numbers, "sources", {})
    read = {*obs.numbers, "occurrences"}
    if obs.detail == PLANNED:  # the plan memory model's estimates, not what the paste printed
        return {name: known.get(name) or ESTIMATED for name in numbers}
    return {name: known.get(name) or (MEASURED if name in read else DERIVED) for name in numbers}


def _once(findings: list[Finding]) -> list[Finding]:
    """The first finding of each ONE_FINDING category, given the numbers of the later ones it lacks."""
    first: dict[str, Finding] = {}
    kept = []
    for finding in findings:
        if finding.category in first:
            for name, value in finding.numbers.items():
                first[finding.category].numbers.setdefault(name, value)
            continue
        if finding.category in ONE_FINDING:
            first[finding.category] = finding
        kept.append(finding)
    return kept


def inferred_observations(seen: list[Observation], context: LogContext, memory: MemoryModel) -> list[Observation]:
    """Failures the log implies without vLLM saying so (e.g. only `# GPU blocks: N` was printed)."""
    if graphs := warned_graphs(seen, context):
        return graphs
    categories = {obs.category for obs in seen}
    if context.server_up or context.up_told or context.other_limit_refused:
        return []  # a server that started had enough; sliding-window models print fewer tokens than they serve
    if categories & {"kv_cache_too_small_at_startup", "no_cache_blocks"}:
        return []
    if context.available_kv_gib is not None and context.available_kv_gib <= 0:
        return [
            _inferred("no_cache_blocks", {"kv_available_gib": context.available_kv_gib}, context, "available_kv_gib")
        ]
    if context.num_gpu_blocks == 0:  # no block at all: vLLM's check says there is no memory for the cache
        return [_inferred("no_cache_blocks", {"num_gpu_blocks": 0}, context, "num_gpu_blocks")]
    limit = context.max_model_len or _own_length(context, memory)
    tokens, source = _kv_cache_tokens(context, memory, limit)
    failed = categories & MEMORY_AND_LENGTH_CATEGORIES  # the paste shows what failed: no estimate needed
    if tokens is None and not failed and (planned := launch_could_not_start(context, memory)) is not None:
        return [planned]
    if tokens is None and not failed and memory.spec is None and (after := failed_after_kv_line(context)):
        return [after]
    # the length check vLLM runs once the cache is sized failed, whatever max_model_len was
    failed_check = context.cache_check_failed and source == "num_gpu_blocks"
    if tokens is None or not (failed_check or limit and tokens < limit):
        return []
    numbers = {"kv_cache_tokens": tokens}
    if limit:
        numbers["max_model_len"] = limit
    if source == "num_gpu_blocks":
        numbers.update(num_gpu_blocks=context.num_gpu_blocks, block_size=memory.block_size)
    if source == "available_kv_gib":  # the KV memory the log printed, in tokens of the model's KV bytes per token
        needed = memory.needed_gib(limit)
        numbers.update(kv_available_gib=context.available_kv_gib, kv_needed_gib=needed)
        numbers |= {"weights_gib": context.weights_gib} if context.weights_gib else {}
    return [_inferred("kv_cache_too_small_at_startup", numbers, context, source)]


def _inferred(category: str, numbers: dict, context: LogContext, source: str) -> Observation:
    line = context.evidence(source)
    return Observation(category, "startup", numbers, line, (0, len(line)))


def _own_length(context: LogContext, memory: MemoryModel) -> int | None:
    """The model's own context, which vLLM serves where no --max-model-len is given: the length its check after the
    KV cache line holds a start-up to."""
    if not context.startup_failed or not context.available_kv_gib or memory.spec is None:
        return None
    return memory.spec.derived_max_model_len


def _kv_cache_tokens(context: LogContext, memory: MemoryModel, limit: int | None) -> tuple[int | None, str]:
    if context.num_gpu_blocks is not None:
        return memory.kv_tokens(context.num_gpu_blocks), "num_gpu_blocks"
    if context.kv_cache_tokens is not None:
        return context.kv_cache_tokens, "kv_cache_tokens"
    if context.max_concurrency is not None and context.max_model_len:
        return int(context.max_concurrency * context.max_model_len), "max_concurrency"
    if context.startup_failed and context.available_kv_gib and limit:  # the refusal itself is cut off
        return memory.max_len_for(context.available_kv_gib, limit=limit), "available_kv_gib"
    return None, ""
