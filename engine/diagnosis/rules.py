"""Causes as rules over facts: what the numbers a text states say happened, whatever words state them.

vLLM's known wordings are the strongest evidence (their recognisers give observations directly); these rules
are the other way in, each over the facts of facts.py, and each stated in one sentence in docs/diagnose.md:
- a refusal that states a prompt and a context length where prompt (+ max_tokens) exceeds it, or max_tokens alone
  as large as the context, is request_too_long;
- a start-up refusal that states free and total memory and a utilization where free < utilization x total is
  memory held elsewhere;
- a start-up refusal whose KV cache needs more memory than is available, or holds fewer tokens than
  max_model_len, is kv_cache_too_small_at_startup;
- a count of preemptions above 0, or a KV cache 90 % full or more while requests wait, while latency is told,
  while it keeps filling, or at 99 %, is KV pressure (preemption: vLLM's V1 preempts without a warning);
- a refusal that states a step budget (max_num_batched_tokens) below max_model_len without chunked prefill, or a
  step that schedules no token (max_num_scheduled_tokens <= 0), is batched_tokens_lt_model_len;
- an answer that stopped for length at 16 tokens, or at another round number (256, 512...) where the request shown
  sent no max_tokens, stopped at a default cap (max_tokens_default_truncation).
A rule gives nothing where a wording already named the cause; then the wording's numbers are the reading.
"""

import re

from kvtool.engine.diagnosis import caps, told
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED, WORDED, Fact, Facts
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES, NOT_POSITIVE, Observation, evidence_window
from kvtool.engine.diagnosis.recognisers import FULL_PERCENT
from kvtool.engine.sizing.defaults import KV_CACHE_PRESSURE_PERCENT

# words that make a line a refusal or a warning about the numbers it states
REFUSAL = re.compile(
    r"error|exceed|too (?:long|large|big|small)|longer than|larger than|greater than|more than|less than|below|"
    r"smaller than|not enough|cannot|can't|reduce|however|too many|warning|refus|reject|fail|<|>|"
    r"超过|超出|过长|不足|小于|大于|低于|报错|崩溃|失败|只有|crash\w*|dies|died|"
    r"won'?t (?:start|come up|load|run)|will not|unable|does(?:n'?t| not) (?:start|fit)|but only|"
    # Japanese, Korean, Spanish, Portuguese, German, Russian, French
    r"起動しない|超え|エラー|실패|초과|에러|오류|supera|excede|mayor que|maior que|menor que|no arranca|não inicia|"
    r"erro\b|überschreit|größer als|kleiner als|Fehler|startet nicht|nur \d|превыша|больше|меньше|ошибк|"
    r"не запускается|не стартует|пада\w*|落ち|dépasse|erreur|しかない|밖에|뿐|только",
    re.IGNORECASE,
)
OOM = ("cuda_oom_startup", "cuda_oom_runtime")
# a length's row or sentence that says it did not start: a table's "**no**", 否, ❌, "fails", "does not start"
NOT_STARTED = re.compile(
    r"\b(?:no|not|fails?|failed|false|OOM|crash\w*|nein|não|нет)\b|否|不能|失败|❌|✗|✘|❎|×|いいえ|起動しない|아니|실패",
    re.IGNORECASE,
)
KV_WORDS = re.compile(r"KV[ -]?(?:cache|缓存|キャッシュ|캐시|кэш)|caché KV|cache KV", re.IGNORECASE)
SENTENCE_END = re.compile(r"[。！？!?]|\.\s")  # where one sentence of a paragraph ends ("0.9" is none)
SAME_CAUSE = {"kv_cache_near_full": "preemption"}  # a wording of the same cause as a rule's
LOAD = ("num_running", "num_waiting", "concurrency", "tpot_ms", "ttft_ms")  # what a KV pressure finding tells


def rule_observations(seen: list[Observation], context: LogContext) -> list[Observation]:
    """What the facts show that no wording said."""
    # a cut told beside a request without max_tokens names no cap: the rule reads it (explain merges the two)
    named = {SAME_CAUSE.get(o.category, o.category) for o in seen if o.numbers or o.category != caps.CATEGORY}
    facts = Facts(fact for fact in context.facts if fact.line not in context.read_lines)  # a wording explained them
    if context.other_limit_refused:  # a refusal for images, a LoRA's rank or tools: the paste's numbers explain none
        named |= MEMORY_AND_LENGTH_CATEGORIES
    found = []
    for category, rule in RULES:
        if category not in named and (observation := rule(facts, context)) is not None:
            found.append(observation)
            named.add(category)
    return found


def vetoed(observations: list[Observation], context: LogContext) -> list[Observation]:
    """The observations without a default output cap where every answer the paste shows ended by itself
    (finish_reason "stop"): a cap ends an answer with "length"."""
    reasons = caps.finish_reasons(context.facts)
    if "stop" not in reasons or "length" in reasons:
        return observations
    return [obs for obs in observations if obs.category != "max_tokens_default_truncation"]


def guessed(observations: list[Observation], context: LogContext) -> list[Observation]:
    """The observations without an out-of-memory error that states no number (PyTorch's message states what it
    tried to allocate) where a kubelet killed the container for a failed probe: exit code 137 is its SIGKILL, and a
    reporter's "CUDA out of memory?" a guess (Kubernetes' OOMKilled is the host's memory, no GPU's either)."""
    if not context.probe_killed:
        return observations
    return [obs for obs in observations if not (obs.category in OOM and not obs.numbers)]


def client_literals(observations: list[Observation], context: LogContext) -> list[Observation]:
    """A request refused with "max_tokens must be at least 1, got N" (N <= 0) where the paste itself sets max_tokens
    to N, or says N means no limit (a client's own convention, -1 in llama.cpp's and many UIs'): vLLM's validation
    refused the client's setting; no prompt is over the context."""
    return [_literal(obs, context) or obs for obs in observations]


def _literal(obs: Observation, context: LogContext) -> Observation | None:
    asked = obs.numbers.get("max_tokens")
    if obs.category != "request_too_long" or asked is None or asked > 0 or "prompt_tokens" in obs.numbers:
        return None
    stated = any(fact.value == asked for fact in context.facts.of("max_tokens", (KEYED, WORDED)))
    if not (stated or (context.unlimited_told and asked in (-1, 0))):
        return None
    return Observation(NOT_POSITIVE, "request", {"max_tokens": asked}, obs.evidence, obs.span, count=obs.count)


def _observation(category: str, stage: str, numbers: dict, fact: Fact, detail: str | None = None) -> Observation:
    evidence, span = evidence_window(fact.evidence, fact.span)
    return Observation(category, stage, numbers, evidence, span, detail)


def _refusals(facts: Facts, *quantities: str) -> list[tuple[Fact, dict[str, Fact]]]:
    """Each refusal line that states all `quantities`: (its first fact, the first fact of each quantity)."""
    by_line: dict[int, dict[str, Fact]] = {}
    for fact in facts:
        if fact.quantity in quantities:
            by_line.setdefault(fact.line, {}).setdefault(fact.quantity, fact)
    found = []
    for stated in by_line.values():
        if len(stated) == len(quantities) and REFUSAL.search(next(iter(stated.values())).evidence):
            found.append((min(stated.values(), key=lambda fact: fact.span[0]), stated))
    return found


def prompt_over_context(facts: Facts, context: LogContext) -> Observation | None:
    for first, stated in _refusals(facts, "prompt_tokens", "max_model_len"):
        prompt, limit = stated["prompt_tokens"].value, stated["max_model_len"].value
        asked = [f.value for f in facts if f.line == first.line and f.quantity == "max_tokens"]
        numbers = {"prompt_tokens": prompt, "max_model_len": limit}
        if asked and asked[0] >= 0:
            numbers["max_tokens"] = asked[0]
        if len(asked) > 1:  # a wrapper that then set max_tokens itself (to what the context leaves)
            numbers["max_tokens_set"] = asked[-1]
        if prompt + max(numbers.get("max_tokens", 0), 0) > limit:
            return _observation("request_too_long", "request", numbers, first)
    for first, stated in _refusals(facts, "max_tokens", "max_model_len"):  # max_tokens alone over the context
        asked, limit = stated["max_tokens"].value, stated["max_model_len"].value
        if asked >= limit:
            return _observation("request_too_long", "request", {"max_tokens": asked, "max_model_len": limit}, first)
    return None


def memory_held_elsewhere(facts: Facts, context: LogContext) -> Observation | None:
    for first, stated in _refusals(facts, "free_gib", "total_gib", "gpu_memory_utilization"):
        free, total = stated["free_gib"].value, stated["total_gib"].value
        utilization = stated["gpu_memory_utilization"].value
        if 0 < free < utilization * total <= total:
            requested = next((f.value for f in facts if f.line == first.line and f.quantity == "requested_gib"), None)
            numbers = {"free_gib": free, "total_gib": total, "gpu_memory_utilization": utilization}
            numbers["requested_gib"] = requested or round(utilization * total, 2)
            if (used := facts.largest("gpu_used_gib")) is not None:  # what nvidia-smi or DCGM shows others hold
                numbers["other_process_gib"] = used.value
            return _observation("gpu_memory_held_by_others", "startup", numbers, first)
    return None


def kv_pressure(facts: Facts, context: LogContext) -> Observation | None:
    """A cache at least KV_CACHE_PRESSURE_PERCENT full with a sign that it is what limits the load."""
    usage = [fact for fact in facts.of("kv_cache_usage_percent") if isinstance(fact.value, (int, float))]
    fullest = facts.largest("kv_cache_usage_percent")
    if (counted := facts.largest("num_preemptions")) is not None and counted.value > 0:
        numbers = {"num_preemptions": counted.value}
        if fullest is not None:  # the load where it preempted most, else where the cache was fullest
            numbers |= _load(facts, next((u for u in usage if u.line == counted.line), fullest))
        return _observation("preemption", "runtime", numbers, counted)
    if fullest is None or fullest.value < KV_CACHE_PRESSURE_PERCENT:
        return None
    waiting = [f for f in facts.of("num_waiting") if f.value > 0 and _usage_in_line(usage, f.line)]
    rising = len(usage) >= 2 and usage[-1].value >= usage[0].value and usage[-1].value >= KV_CACHE_PRESSURE_PERCENT
    latency = facts.of("tpot_ms") + facts.of("ttft_ms")
    preempting = any(fact.value > 0 for fact in facts.of("preemptions_per_s"))
    full = fullest.value >= FULL_PERCENT
    if not (waiting or latency or preempting or full or (rising and len({u.line for u in usage}) > 1)):
        return None
    return _observation("preemption", "runtime", _load(facts, fullest), fullest, "KV pressure")


def _load(facts: Facts, fullest: Fact) -> dict:
    """The load where the cache was fullest (the same line: a stats line, a table's row), else the largest told."""
    numbers = {"kv_cache_usage_percent": fullest.value}
    there: dict = {}  # a line may tell the load idle and busy: the larger is where the cache filled
    for fact in facts.in_lines(fullest.line, fullest.line):
        if isinstance(fact.value, (int, float)):
            there[fact.quantity] = max(fact.value, there.get(fact.quantity, fact.value))
    for name in LOAD:
        if name in there:
            numbers[name] = there[name]
        elif found := facts.largest(name):
            numbers[name] = found.value
    return numbers


def _usage_in_line(usage: list[Fact], line: int) -> bool:
    return any(fact.line == line and fact.value >= KV_CACHE_PRESSURE_PERCENT for fact in usage)


def step_too_small(facts: Facts, context: LogContext) -> Observation | None:
    for first, stated in _refusals(facts, "max_num_batched_tokens", "max_model_len"):
        batched, limit = stated["max_num_batched_tokens"].value, stated["max_model_len"].value
        if batched < limit and context.enable_chunked_prefill is not True:  # chunks are how a step holds less
            numbers = {"max_num_batched_tokens": batched, "max_model_len": limit}
            return _observation("batched_tokens_lt_model_len", "startup", numbers, first)
    for fact in facts.of("max_num_scheduled_tokens"):
        if fact.value <= 0:
            numbers = {"max_num_scheduled_tokens": fact.value}
            return _observation("batched_tokens_lt_model_len", "startup", numbers, fact, "speculative decoding")
    return None


def kv_cache_short(facts: Facts, context: LogContext) -> Observation | None:
    """A start-up refusal whose KV cache needs more memory than is available, or holds fewer tokens than
    max_model_len."""
    for first, stated in _refusals(facts, "kv_needed_gib") + _kv_requested(facts):
        needed = stated["kv_needed_gib"].value
        available = _in_line(facts, first, "kv_available_gib") or _in_line(facts, first, "free_gib")
        if available and needed > (available := next(iter(available.values()))):
            numbers = {"kv_needed_gib": needed, "kv_available_gib": available}
            numbers |= _in_line(facts, first, "max_model_len") | _in_line(facts, first, "estimated_max_model_len")
            if "max_model_len" in stated:  # the length the size was told for
                numbers["max_model_len"] = stated["max_model_len"].value
            return _observation("kv_cache_too_small_at_startup", "startup", numbers, first)
    for first, stated in _refusals(facts, "kv_cache_tokens", "max_model_len"):
        tokens, limit = stated["kv_cache_tokens"].value, stated["max_model_len"].value
        if tokens < limit and not (context.server_up or context.up_told):  # a server that started had enough
            numbers = {"kv_cache_tokens": tokens, "max_model_len": limit}
            return _observation("kv_cache_too_small_at_startup", "startup", numbers, first)
    return None


def _kv_requested(facts: Facts) -> list[tuple[Fact, dict[str, Fact]]]:
    """A size needed, told beside words of the KV cache and a context length but no utilization (that would be the
    free-memory refusal): the KV cache one max_model_len request needs ("max seq len 32768 需要 8.0 GiB 的 KV
    cache", "KVキャッシュが 8 GiB 必要")."""
    found = []
    # the request it sizes is one of max_model_len tokens, however its length is named ("для запроса длиной 32768")
    for length in ("max_model_len", "prompt_tokens"):
        for first, stated in _refusals(facts, "requested_gib", length):
            size = stated["requested_gib"]  # a launch's flags earlier in the paragraph are not its sentence
            near = [fact.quantity for fact in facts.in_lines(size.line, size.line) if _near(fact, size)]
            if KV_WORDS.search(first.evidence) and "gpu_memory_utilization" not in near:
                found.append((first, {"kv_needed_gib": stated["requested_gib"], "max_model_len": stated[length]}))
    return found


def _near(fact: Fact, other: Fact) -> bool:
    """Whether two facts of one line are told in one sentence: a short paste's lines are joined into one, and a
    utilization told a sentence later is not the free-memory refusal's."""
    start, end = sorted((fact.span[0], other.span[0]))
    return not SENTENCE_END.search(fact.evidence, start, end)


def lengths_tried(facts: Facts, context: LogContext) -> Observation | None:
    """Lengths tried one after another beside the KV cache size in tokens: those up to it started, the one past it
    failed (vLLM's check that one max_model_len request fits the cache)."""
    tokens, lengths = facts.largest("kv_cache_tokens"), facts.of("max_model_len", (KEYED, WORDED))
    if tokens is None or len({fact.value for fact in lengths}) < 2:
        return None
    longest = max(lengths, key=lambda fact: (fact.value, fact.line))
    shorter = [fact.value for fact in lengths if fact.value < longest.value]
    after = longest.evidence[longest.span[1] :] or longest.evidence
    failed = context.startup_failed or REFUSAL.search(after) or NOT_STARTED.search(after)
    if not failed or max(shorter) > tokens.value or longest.value <= tokens.value:
        return None
    numbers = {"max_model_len": longest.value, "kv_cache_tokens": tokens.value}
    return _observation("kv_cache_too_small_at_startup", "startup", numbers, longest)


def _in_line(facts: Facts, first: Fact, quantity: str) -> dict:
    found = next((fact for fact in facts if fact.line == first.line and fact.quantity == quantity), None)
    return {quantity: found.value} if found else {}


RULES = (
    ("request_too_long", prompt_over_context),
    ("gpu_memory_held_by_others", memory_held_elsewhere),
    ("preemption", kv_pressure),
    ("batched_tokens_lt_model_len", step_too_small),
    ("max_tokens_default_truncation", caps.default_cap),
    ("kv_cache_too_small_at_startup", kv_cache_short),
    ("kv_cache_too_small_at_startup", lengths_tried),
    *told.RULES,
)
