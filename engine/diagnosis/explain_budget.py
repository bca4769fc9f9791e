"""What one scheduler step holds (max_num_batched_tokens) against what it must hold: the model's context, a
prompt (v0 limits a prompt to min(max_model_len, max_num_batched_tokens) unless chunked prefill runs without
multi-step scheduling), the profiling run's multimodal prompts, speculative decoding's draft slots."""

import re
from dataclasses import replace

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain_length import request_too_long
from kvtool.engine.diagnosis.findings import Alternative, Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel

STEP_WHY = (
    "if max_num_batched_tokens is {limit}: v0 limits a prompt to min(max_model_len, max_num_batched_tokens) when "
    "chunked prefill is off after the budget was chosen for it (0.7 turns it off for MLA models such as DeepSeek, "
    "and on CPU) or runs with multi-step scheduling (--num-scheduler-steps > 1)"
)
CONTEXT_WHY = "if --max-model-len is {limit}, the prompt is longer than the model's context"
SCHEDULED_TOKENS_WARNED_BELOW = 8192
# vLLM 0.1's default max_num_batched_tokens: no model's context, so a prompt limit of it is the step budget
DEFAULT_STEP_BUDGETS = (2560,)
MM_PLACEHOLDERS = re.compile(r"'(\w+)': (\d+)")  # vLLM warns when speculative decoding leaves fewer tokens a step


def _finding(obs: Observation, numbers: dict, summary: str, fixes: list[Fix], **kw) -> Finding:
    return Finding("batched_tokens_lt_model_len", obs.stage, summary, numbers, fixes, obs.evidence, obs.span, **kw)


def _round_up(tokens: int, to: int = 1024) -> int:
    return -(-tokens // to) * to


def prompt_limit(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    """v0's "Input prompt (N tokens) is too long and exceeds limit of M": the context or the step budget, as
    far as the log tells them apart."""
    n = dict(obs.numbers)
    limit = n["prompt_limit"]
    by_step = (
        context.max_num_batched_tokens == limit
        or (context.chunked_prefill_forced_off and context.max_num_batched_tokens is None)
        or (context.max_model_len or 0) > limit
        or limit in DEFAULT_STEP_BUDGETS
        or context.request_accepted
    )
    if by_step and context.max_model_len != limit:
        return _step_budget(obs, n, context, [_context_alternative(limit)])
    finding = request_too_long(replace(obs, numbers={**n, "max_model_len": limit}), context, memory)
    if context.max_model_len != limit:  # the log does not say which limit M is
        finding.alternatives.append(_step_alternative(n["prompt_tokens"], limit, context))
    return finding


def _step_budget(obs: Observation, n: dict, context: LogContext, alternatives: list[Alternative]) -> Finding:
    limit, prompt = n["prompt_limit"], n["prompt_tokens"]
    n["max_num_batched_tokens"] = limit
    if context.max_model_len:
        n["max_model_len"] = context.max_model_len
    summary = (
        f"The prompt ({prompt} tokens) is longer than one scheduler step holds (max_num_batched_tokens {limit}): "
        "vLLM's v0 scheduler drops such a prompt when chunked prefill was turned off after the budget was chosen for "
        "it, or runs with multi-step scheduling."
    )
    return _finding(obs, n, summary, _step_fixes(prompt, context), alternatives=alternatives)


def _step_fixes(prompt: int, context: LogContext) -> list[Fix]:
    step = Fix(
        "let one step hold the whole prompt",
        flag="--max-num-batched-tokens",
        value=_round_up(max(prompt, context.max_model_len or 0)),
    )
    if context.chunked_prefill_forced_off:  # vLLM turned it off: it cannot be turned back on
        return [step]
    chunks = Fix("or prefill in chunks, without --num-scheduler-steps", flag="--enable-chunked-prefill", value=True)
    return [step, chunks]


def _step_alternative(prompt: int, limit: int, context: LogContext) -> Alternative:
    return Alternative("batched_tokens_lt_model_len", STEP_WHY.format(limit=limit), _step_fixes(prompt, context))


def _context_alternative(limit: int) -> Alternative:
    fixes = [Fix("trim the prompt, or serve a longer context", flag="--max-model-len", value=None)]
    return Alternative("request_too_long", CONTEXT_WHY.format(limit=limit), fixes)


def batched_tokens_lt_model_len(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    batched, limit = n["max_num_batched_tokens"], n["max_model_len"]
    summary = (
        f"With chunked prefill off, one step holds at most {batched} tokens, so prompts longer than that "
        f"could never run although max_model_len is {limit}."
    )
    fixes = [
        Fix("let one step hold a whole max_model_len prompt", flag="--max-num-batched-tokens", value=limit),
        Fix("or prefill long prompts in chunks", flag="--enable-chunked-prefill", value=True),
        Fix("or lower the context to the step size", flag="--max-model-len", value=batched),
    ]
    return _finding(obs, n, summary, fixes)


def profiling_too_short(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    """The multimodal profiling warning: each profiled sequence (max_num_batched_tokens / max_num_seqs tokens) is
    shorter than the worst-case multimodal prompt."""
    n = dict(obs.numbers)
    seq_len, worst = n["profiling_seq_len"], n["mm_worst_case_tokens"]
    for modality, tokens in MM_PLACEHOLDERS.findall(obs.evidence):  # {'image': 693}: the tokens each modality takes
        n[f"mm_{modality}_tokens"] = int(tokens)
    batched = context.max_num_batched_tokens
    seqs = context.max_num_seqs or (batched // seq_len if batched and seq_len > 0 else None)
    summary = (
        f"The profiling run splits max_num_batched_tokens over max_num_seqs sequences of {seq_len} tokens each, "
        f"shorter than the worst-case multimodal prompt ({worst} tokens): such inputs may fail at run time, and "
        "the memory they need was not profiled."
    )
    if seqs:
        n["max_num_batched_tokens_needed"] = worst * seqs
    fixes = [
        Fix(
            "let each profiled sequence hold the worst-case prompt",
            flag="--max-num-batched-tokens",
            value=n.get("max_num_batched_tokens_needed"),
        ),
        Fix(
            "or profile fewer, longer sequences",
            flag="--max-num-seqs",
            value=max(1, batched // worst) if batched else None,
        ),
        Fix("or allow fewer images, videos or audios per prompt", flag="--limit-mm-per-prompt", value=None),
    ]
    return _finding(obs, n, summary, fixes)


def no_tokens_to_schedule(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    """Speculative decoding reserves draft slots for every sequence of a step: they took the whole budget."""
    n = dict(obs.numbers)
    left = n["max_num_scheduled_tokens"]
    summary = (
        "With speculative decoding every one of max_num_seqs sequences reserves draft slots in a step; they take "
        f"all of max_num_batched_tokens and {-left} tokens more, so no token can be scheduled."
    )
    batched = context.max_num_batched_tokens
    if batched:
        n["max_num_batched_tokens_needed"] = batched - left + SCHEDULED_TOKENS_WARNED_BELOW
    fixes = [
        Fix(
            f"raise the step budget by at least {1 - left} tokens",
            flag="--max-num-batched-tokens",
            value=n.get("max_num_batched_tokens_needed"),
        ),
        Fix(
            "or run fewer sequences at once: each reserves draft slots",
            flag="--max-num-seqs",
            value=context.max_num_seqs // 2 if context.max_num_seqs else None,
        ),
        Fix("or draft fewer tokens (num_speculative_tokens)", flag="--speculative-config", value=None),
    ]
    return _finding(obs, n, summary, fixes)


def item_too_large(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    """A model whose encoder input cannot be chunked needs one whole image (video, audio) item in a step."""
    n = dict(obs.numbers)
    item, batched = n["max_tokens_per_mm_item"], n["max_num_batched_tokens"]
    if context.max_model_len:
        n["max_model_len"] = context.max_model_len
    n["max_num_batched_tokens_needed"] = _round_up(item, 256)
    summary = (
        f"One multimodal item takes {item} tokens and this model cannot split it over steps, but a step holds only "
        f"max_num_batched_tokens {batched}."
    )
    fixes = [
        Fix(
            "let one step hold a whole item", flag="--max-num-batched-tokens", value=n["max_num_batched_tokens_needed"]
        ),
        Fix("or send smaller images (fewer tokens an item)", flag="--mm-processor-kwargs", value=None),
    ]
    return _finding(obs, n, summary, fixes)
