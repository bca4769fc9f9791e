"""Causes from facts a paste states on different lines: the launch, the client's settings and the reporter's own
words, beside a sign that the failure happened whose message is missing or retold (a 400, a refusal told in
prose). Each rule is stated in one sentence in docs/diagnose.md:
- a request refused while the prompt the paste states, alone or with max_tokens, is more than the launch's
  max_model_len is request_too_long (vLLM checks prompt + max_tokens against the context, not the prompt alone);
  so is one whose max_tokens (a chat UI's "Max Tokens", num_predict) leaves less than a quarter of the context,
  and one refused with no error text only once the conversation grew or a long document came (a likely cause);
- "no memory for the cache blocks" told in any words, at a start-up that did not come up, is no_cache_blocks;
- free memory told to be below the utilization asked, where nvidia-smi shows what the GPU already has in use and
  total - used < utilization x total, is gpu_memory_held_by_others (what is in use before vLLM starts is others');
  so is that refusal told alone, and two launches on one card whose utilizations add up to more than 1;
- pydantic's "validation error for SchedulerConfig" with its detail cut off (or retold: "something about
  SchedulerConfig", "max_num_batched_tokens меньше max_model_len"), or a launch told not to start that turns chunked
  prefill off, where the launch sets a step budget below max_model_len without chunked prefill, is
  batched_tokens_lt_model_len (the check that refuses it).
"""

import re

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED, WORDED, Fact, Facts
from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.diagnosis.measured import default_utilization
from kvtool.engine.diagnosis.memory_model import log_spec

ROOM_SHARE = 4  # a cap that leaves less than a quarter of the context: a chat's template, system prompt and history
DEVICES = re.compile(r"CUDA_VISIBLE_DEVICES=['\"]?([\d,]+)")
LAUNCH = re.compile(r"vllm serve|api_server|--model\b")  # a line that launches a server
CAP_AT_CONTEXT = "output cap near the context"  # an observation's detail: no prompt is stated
EXPORTER_UNITS = ("MiB", "bytes")  # the units of an exporter's samples of free memory (DCGM, nvidia_gpu_exporter)
GREW = "refused once it grew"  # an observation's detail: no refusal text, the growth told
NOTES = {
    GREW: "The paste does not show vLLM's refusal, only a request refused once the conversation grew or a long "
    "document came: a prompt past max_model_len is the likely cause, not a quoted one. The server's log at DEBUG, or "
    "the response body, shows the prompt's length."
}


def request_over_context(facts: Facts, context: LogContext) -> Observation | None:
    limit, asked = context.max_model_len, facts.setting("max_tokens")
    if not context.request_refused or not limit:
        return None
    prompts = [fact for fact in facts.of("prompt_tokens", (KEYED, WORDED)) if 0 < fact.value]
    if over := next((fact for fact in prompts if fact.value > limit), None):  # the prompt alone ("~19200 tokens")
        numbers = {"prompt_tokens": over.value, "max_model_len": limit}
        return _told(context.request_refused, "request_too_long", "request", numbers)
    if asked is None or not 0 < asked.value:
        return None
    if prompts:
        if asked.value >= limit or prompts[0].value + asked.value <= limit:
            return None
        numbers = {"prompt_tokens": prompts[0].value, "max_tokens": asked.value, "max_model_len": limit}
        return _told(context.request_refused, "request_too_long", "request", numbers)
    if (limit - asked.value) * ROOM_SHARE < limit:  # a cap at (or near) the context leaves no room for a prompt
        numbers = {"max_tokens": asked.value, "completion_tokens": asked.value, "max_model_len": limit}
        return _told(context.request_refused, "request_too_long", "request", numbers, CAP_AT_CONTEXT)
    return None


def outgrew_context(facts: Facts, context: LogContext) -> Observation | None:
    """A request refused with no error text (an access log's 400, a chat UI's generic error) only once the
    conversation grew or a long document came, where the launch set max_model_len: the prompt outgrew the context.
    A likely cause, not a quoted one (GREW); a refusal of another kind, or a first short message, is not this."""
    limit = context.max_model_len
    if not context.request_refused or not context.grew_told or not limit or context.other_limit_refused:
        return None
    return _told(context.request_refused, "request_too_long", "request", {"max_model_len": limit}, GREW)


def no_blocks_retold(facts: Facts, context: LogContext) -> Observation | None:
    if not context.no_blocks_told or context.server_up:
        return None
    numbers = {"gpu_memory_utilization": context.gpu_memory_utilization, "weights_gib": context.weights_gib}
    numbers = {name: value for name, value in numbers.items() if value is not None}
    return _told(context.no_blocks_told, "no_cache_blocks", "startup", numbers)


def held_retold(facts: Facts, context: LogContext) -> Observation | None:
    if not context.free_below_told or context.server_up:
        return None
    utilization = default_utilization(context)  # the check runs at vLLM's default where the paste states none
    numbers = {"gpu_memory_utilization": utilization}
    if (in_use := _in_use(facts)) is not None:  # the GPU's use before vLLM starts (nvidia-smi, DCGM): others'
        used, total = in_use
        free = round(total - used, 2)
        if free >= utilization * total:
            return None
        numbers |= {"free_gib": free, "total_gib": total, "requested_gib": round(utilization * total, 2)}
        numbers["other_process_gib"] = used
    numbers |= _others(facts)
    return _told(context.free_below_told, "gpu_memory_held_by_others", "startup", numbers)


def _in_use(facts: Facts) -> tuple[float, float] | None:
    """What the GPU has in use and its total: nvidia-smi's used of total, or a DCGM exporter's framebuffer used and
    free (the whole card is their sum: its total states the card's name, not what CUDA sees)."""
    if (used := facts.largest("gpu_used_gib")) is None:
        return None
    if free := [fact for fact in facts.of("free_gib", (KEYED,)) if fact.unit in EXPORTER_UNITS]:
        return used.value, round(used.value + free[0].value, 2)
    total = facts.largest("total_gib")
    return (used.value, total.value) if total is not None else None


def shared_card(facts: Facts, context: LogContext) -> Observation | None:
    """Two launches on one card whose utilizations add up to more than the whole of it, one failed at start-up."""
    if not (context.startup_failed or context.free_below_told) or context.server_up:
        return None
    asked = [fact for fact in facts.of("gpu_memory_utilization", (KEYED,)) if LAUNCH.search(fact.evidence)]
    spans = {(fact.line, fact.span): fact for fact in asked}  # each launch's own
    if len(spans) < 2 or sum(fact.value for fact in spans.values()) <= 1:
        return None
    if len({_device(fact) for fact in spans.values()}) > 1:
        return None  # launches on different cards
    last = list(spans.values())[-1]
    numbers = {"gpu_memory_utilization": last.value, "utilization_sum": round(sum(f.value for f in spans.values()), 2)}
    return _told(last.evidence, "gpu_memory_held_by_others", "startup", numbers | _others(facts))


def _device(fact: Fact) -> str | None:
    """The CUDA_VISIBLE_DEVICES a launch sets before its utilization, if any."""
    found = DEVICES.findall(fact.evidence[: fact.span[0]])
    return found[-1] if found else None


def _others(facts: Facts) -> dict:
    """What the processes nvidia-smi lists hold, in MiB as it prints them."""
    held = [fact.value for fact in facts.of("process_gib")]
    return {"other_process_mib": round(sum(held) * 1024)} if held else {}


def step_retold(facts: Facts, context: LogContext) -> Observation | None:
    """The step budget a launcher set, refused by SchedulerConfig with its detail cut off: below max_model_len (the
    launch's, else the model's own from the catalog), or with no length known at all, the one check that refuses a
    step budget alone (named with what the paste states)."""
    batched = context.max_num_batched_tokens
    refused = context.scheduler_refused or context.step_below_told
    # chunked prefill turned off beside a smaller step budget is the refusal, in a launch told not to start
    refused = refused or (context.down_told and context.enable_chunked_prefill is False)
    if not refused or not batched or context.enable_chunked_prefill is True:
        return None
    spec = None if context.max_model_len else log_spec(context.model, context.served_model_name)
    limit = context.max_model_len or (spec.derived_max_model_len if spec else None)
    if limit is not None and batched >= limit:
        return None
    line = context.facts.setting("max_num_batched_tokens")
    numbers = {"max_num_batched_tokens": batched} | ({"max_model_len": limit} if limit else {})
    return _told(line.evidence if line else "", "batched_tokens_lt_model_len", "startup", numbers)


def preemption_retold(facts: Facts, context: LogContext) -> Observation | None:
    """vLLM's preemption warning quoted loosely ("preempted by PreemptionMode.RECOMPUTE ... not enough KV cache
    space"), inside prose of any language."""
    if not context.preemption_told:
        return None
    return _told(context.preemption_told, "preemption", "runtime", _load(facts, context))


def concurrency_past_cache(facts: Facts, context: LogContext) -> Observation | None:
    """Benchmarks at several concurrencies, the largest past what the KV cache holds at once (vLLM's "Maximum
    concurrency for N tokens per request", or its KV tokens over a request's): the extra requests wait or preempt."""
    asked = {fact.value for fact in facts.of("concurrency", (KEYED,)) if isinstance(fact.value, int)}
    holds = context.max_concurrency or _held_at_once(facts, context)
    if len(asked) < 2 or not holds or max(asked) <= holds:
        return None
    numbers = _load(facts, context) | {"request_concurrency": max(asked), "max_concurrency": holds}
    top = next(fact for fact in facts.of("concurrency", (KEYED,)) if fact.value == max(asked))
    return _told(top.evidence, "preemption", "runtime", numbers, "concurrency past the KV cache")


def _held_at_once(facts: Facts, context: LogContext) -> float | None:
    prompt, completion = facts.setting("prompt_tokens"), facts.setting("completion_tokens")
    if not context.kv_cache_tokens or prompt is None or completion is None:
        return None
    return round(context.kv_cache_tokens / (prompt.value + completion.value), 2)


def _load(facts: Facts, context: LogContext) -> dict:
    """The sizes a KV pressure finding is fixed with, where the paste states them."""
    numbers = {"kv_tokens": context.kv_cache_tokens, "max_model_len": context.max_model_len}
    for name in ("prompt_tokens", "completion_tokens"):
        if (fact := facts.setting(name)) is not None:
            numbers[name] = fact.value
    return {name: value for name, value in numbers.items() if value is not None}


def _told(line: str, category: str, stage: str, numbers: dict, detail: str | None = None) -> Observation:
    evidence, span = evidence_window(line, (0, len(line)))
    return Observation(category, stage, numbers, evidence, span, detail)


RULES = (
    ("request_too_long", request_over_context),
    ("request_too_long", outgrew_context),
    ("no_cache_blocks", no_blocks_retold),
    ("gpu_memory_held_by_others", held_retold),
    ("gpu_memory_held_by_others", shared_card),
    ("batched_tokens_lt_model_len", step_retold),
    ("preemption", preemption_retold),
    ("preemption", concurrency_past_cache),
)
