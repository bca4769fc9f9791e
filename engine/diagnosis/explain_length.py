"""Request-length findings: how many tokens too many, the largest max_tokens that fits, and the
server-side length that would take the request."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED
from kvtool.engine.diagnosis.findings import NOT_POSITIVE, Alternative, Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import DERIVED, ESTIMATED, MEASURED, default_utilization
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.request_length import RequestTooLongError, check_request_length

V0_SCHEDULER_NOTE = (
    'vLLM\'s v0 scheduler dropped the request (finish_reason "length"); its limit is max_model_len with chunked '
    "prefill on (and no multi-step scheduling), else min(max_model_len, max_num_batched_tokens)."
)
COMPLETIONS_NOTE = (
    "On /v1/completions, vLLM 0.10.2 to 0.15 print max_model_len minus max_tokens as the "
    '"maximum context length": the real limit may be larger by the request\'s max_tokens.'
)
LITERAL_WHY = "if the client sent max_tokens -1 itself (its way to say no limit), vLLM refused that setting"
LITERAL_FIX = "leave max_tokens out of the request"
CLAMP_NOTE = (
    "vLLM 0.32 and later (and `kvtool serve --overflow clamp`) lower max_tokens to the room left instead of rejecting."
)


def request_too_long(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = Numbers(obs.numbers)
    _launch(n, obs, context)
    limit, prompt, max_tokens = n.get("max_model_len"), n.get("prompt_tokens"), n.get("max_tokens")
    if prompt is None and max_tokens is not None and max_tokens < 1 and limit is None:
        n["prompt_overflow_tokens"] = -max_tokens  # 0.4-era chat: max_tokens = max_model_len - prompt
        n["trim_tokens"] = 1 - max_tokens
        finding = _finding(
            obs,
            n,
            f"The prompt is {-max_tokens} tokens longer than max_model_len, so the server "
            f"computed max_tokens = {max_tokens}.",
            [_trim(n["trim_tokens"])],
        )
        if max_tokens == -1:  # also a client's "no limit"
            finding.alternatives.append(Alternative(NOT_POSITIVE, LITERAL_WHY, [Fix(LITERAL_FIX, param="max_tokens")]))
        return finding
    if "prompt_characters" in n:
        return _too_many_characters(obs, n)
    if "truncate_prompt_tokens" in n:
        return _finding(
            obs,
            n,
            "truncate_prompt_tokens is larger than the room the context leaves for the prompt.",
            [Fix("lower truncate_prompt_tokens", param="truncate_prompt_tokens", value=n["max_input_tokens"])],
        )
    if "lookahead_slots" in n:
        return _larger_than_the_cache(obs, n, context, memory)
    if prompt is not None and limit is not None:
        return _prompt_and_output(obs, n, context, memory)
    return _max_tokens_only(obs, n)


# an RL trainer's rollout lengths (verl, EasyR1, OpenRLHF): its engine's max_model_len is their sum
WRAPPER_LENGTHS = ("max_prompt_length", "max_response_length")


def _launch(n: Numbers, obs: Observation, context: LogContext) -> None:
    """The launch's max_model_len where the message does not tell the real one: vLLM sets an omitted max_tokens to
    max_model_len - prompt, so "max_tokens must be at least 1, got -N" is a prompt N tokens over it; /v1/completions
    on 0.10.2 - 0.15 prints max_model_len - max_tokens as the context. Where the launch asked for another length
    than the one the message states, both are kept."""
    for name in WRAPPER_LENGTHS:
        if (fact := context.facts.setting(name)) is not None:
            n.put(name, fact.value, MEASURED)
    launched, max_tokens = context.max_model_len, n.get("max_tokens")
    if launched is None:
        return
    if "prompt_tokens" not in n and "max_model_len" not in n and max_tokens is not None and max_tokens < 1:
        n.put("max_model_len", launched, MEASURED)
        n.put("prompt_tokens", launched - max_tokens, DERIVED)
        return
    sent = _sent_max_tokens(context)
    limit = n.get("max_model_len")
    if limit is not None and sent is not None and limit == launched - sent and "your request has" in obs.evidence:
        n["reported_max_model_len"] = limit
        n.put("max_model_len", launched, MEASURED)
        n.put("max_tokens", sent, MEASURED)
    elif limit is not None and launched != limit:
        n.put("launch_max_model_len", launched, MEASURED)


def _sent_max_tokens(context: LogContext) -> int | None:
    """The max_tokens a request in the paste sent (its body, a call's arguments)."""
    sent = [fact.value for fact in context.facts.of("max_tokens", (KEYED,)) if fact.value > 0]
    return sent[-1] if sent else None


def _larger_than_the_cache(obs: Observation, n: dict, context: LogContext, memory: MemoryModel) -> Finding:
    tokens = context.kv_cache_tokens or (context.num_gpu_blocks and memory.kv_tokens(context.num_gpu_blocks))
    summary = (
        f"The prompt ({n['prompt_tokens']} tokens) is larger than the whole KV cache, so vLLM's v0 scheduler "
        'dropped it (finish_reason "length").'
    )
    fixes = [
        _trim(None),
        Fix(
            "give the KV cache more of the GPU",
            flag="--gpu-memory-utilization",
            value=round(min(0.95, default_utilization(context) + 0.05), 2),
        ),
        Fix("cap the context at what the cache holds", flag="--max-model-len", value=tokens or None),
    ]
    return _finding(obs, n, summary, fixes)


def _prompt_and_output(obs: Observation, n: dict, context: LogContext, memory: MemoryModel) -> Finding:
    limit, prompt, max_tokens = n["max_model_len"], n["prompt_tokens"], n.get("max_tokens")
    param = _rejected_param(prompt, max_tokens, limit)
    if param is None:
        return _finding(
            obs,
            n,
            f"The prompt ({prompt} tokens) fits max_model_len {limit} when sent alone; "
            "the server in the log counted a different budget.",
            [],
        )
    over_by_prompt = param == "input_tokens" and prompt >= limit
    summary, fixes = _prompt_alone(n) if over_by_prompt else _prompt_plus_output(n)
    if "max_tokens" not in n and (sent := _sent_max_tokens(context)) is not None:
        n.put("max_tokens", sent, MEASURED)  # what the request shown asked for, beside a prompt already too long
    fixes.append(
        Fix(
            "budget each request: max_tokens = max_model_len - prompt tokens (count them with the "
            "model's tokenizer), or omit max_tokens on /v1/chat/completions",
            param="max_tokens",
            value=f"{limit} - prompt_tokens",
        )
    )
    fixes += _longer_context(prompt + max(max_tokens or 0, 1), context, memory, n)
    notes = [] if over_by_prompt else [CLAMP_NOTE]
    if "is too long and exceeds limit" in obs.evidence:
        notes.append(V0_SCHEDULER_NOTE)
    if "your request has" in obs.evidence and "is too large" not in obs.evidence:
        notes.append(COMPLETIONS_NOTE)
    return _finding(obs, n, summary, fixes, notes)


def _rejected_param(prompt: int, max_tokens: int | None, limit: int) -> str | None:
    """The field vLLM's length rule blames ("input_tokens" | "max_tokens"), or None when the request fits."""
    try:
        check_request_length(prompt, max_tokens, limit, overflow="reject")
    except RequestTooLongError as err:
        return err.param
    return None


def _prompt_alone(n: dict) -> tuple[str, list[Fix]]:
    prompt, limit = n["prompt_tokens"], n["max_model_len"]
    n["prompt_overflow_tokens"], n["trim_tokens"] = prompt - limit, prompt - limit + 1
    n["overflow_tokens"] = prompt + max(n.get("max_tokens") or 0, 0) - limit
    summary = (
        f"The prompt alone is {prompt} tokens; max_model_len is {limit}, so not even one output "
        f"token fits. Trim at least {n['trim_tokens']} tokens."
    )
    return summary, [_trim(n["trim_tokens"])]


def _prompt_plus_output(n: dict) -> tuple[str, list[Fix]]:
    prompt, limit, max_tokens = n["prompt_tokens"], n["max_model_len"], n["max_tokens"]
    n["requested_tokens"] = prompt + max_tokens
    n["overflow_tokens"], n["largest_max_tokens"] = prompt + max_tokens - limit, limit - prompt
    summary = (
        f"The request needs {prompt + max_tokens} tokens ({prompt} prompt + {max_tokens} max_tokens) but "
        f"max_model_len is {limit}: {n['overflow_tokens']} too many. max_tokens {limit - prompt} would have fit."
    )
    return summary, [Fix("lower max_tokens", param="max_tokens", value=limit - prompt), _trim(n["overflow_tokens"])]


def _longer_context(length: int, context: LogContext, memory: MemoryModel, n: dict) -> list[Fix]:
    """Restart with a larger --max-model-len, saying whether the KV cache would hold it."""
    target = -(-length // 1024) * 1024
    n["needed_max_model_len"] = target
    if memory.spec is not None and target > memory.spec.derived_max_model_len:
        return []
    action = "restart the server with a longer context"
    available, source = context.available_kv_gib, MEASURED
    if available is None and context.total_gpu_gib:
        available, source = memory.kv_budget_gib(context.total_gpu_gib, default_utilization(context)), ESTIMATED
    if available and (fits := memory.max_len_for(available, limit=target)) is not None:
        n.put("kv_available_gib", available, source)
        n.put("kv_max_model_len", fits, DERIVED if source == MEASURED else ESTIMATED)
        action += (
            f" (a {available} GiB KV cache holds it)"
            if fits >= target
            else f" (a {available} GiB KV cache holds only {fits} tokens: add memory first)"
        )
    return [Fix(action, flag="--max-model-len", value=target)]


def _too_many_characters(obs: Observation, n: dict) -> Finding:
    limit_chars = n["max_input_characters"]
    n["trim_characters"] = n["prompt_characters"] - limit_chars
    summary = (
        f"The prompt has {n['prompt_characters']} characters; with the output tokens requested, at most "
        f"{limit_chars} fit (a cheap check before tokenizing)."
    )
    fixes = [Fix("shorten the prompt", param="prompt", value=f"<= {limit_chars} characters")]
    if n.get("max_tokens"):
        fixes.append(
            Fix(
                "request fewer output tokens to leave the prompt more room",
                param="max_tokens",
                value=max(1, n["max_tokens"] // 2),
            )
        )
    return _finding(obs, n, summary, fixes)


def _against(max_tokens: int, limit: int) -> str:
    """How max_tokens stands against max_model_len, in words: a cap at or near the context leaves a prompt no room."""
    if max_tokens > limit:
        return "larger than"
    return "as large as" if max_tokens == limit else f"within {limit - max_tokens} tokens of"


def _max_tokens_only(obs: Observation, n: dict) -> Finding:
    limit, max_tokens = n.get("max_model_len"), n.get("max_tokens")
    if limit is None or max_tokens is None:
        return _finding(obs, n, "The request is longer than the model's context.", [_trim(None)])
    n["max_tokens_over_context"] = max_tokens - limit
    against = _against(max_tokens, limit)
    summary = f"max_tokens {max_tokens} alone is {against} max_model_len {limit}; the prompt needs room too."
    fixes = [
        Fix(
            "lower max_tokens below max_model_len minus the prompt tokens",
            param="max_tokens",
            value=f"{limit} - prompt_tokens",
        ),
        Fix(
            "omit max_tokens on /v1/chat/completions: the server then uses the room left",
            param="max_tokens",
            value=None,
        ),
    ]
    return _finding(obs, n, summary, fixes, [CLAMP_NOTE])


def _trim(tokens: int | None) -> Fix:
    return Fix(
        "trim the prompt (drop old turns, summarise, or retrieve less)",
        param="prompt",
        value=f"-{tokens} tokens" if tokens else None,
    )


def _finding(
    obs: Observation, numbers: dict, summary: str, fixes: list[Fix], notes: list[str] | None = None
) -> Finding:
    return Finding(obs.category, obs.stage, summary, numbers, fixes, obs.evidence, obs.span, notes or [])
