"""An answer cut at an output cap, from facts: where the cap came from decides the fix. A cut is shown by a
finish_reason "length", by a trainer's share of clipped completions, or told in words (cut_words.answer_cut); the
cap is, the surest first:
- vLLM's own default, 16 tokens (/v1/completions, SamplingParams), where an answer stopped at 16, or a cut is told
  and a request shows max_tokens=16 (a setting that did not reach vLLM);
- a round cap vLLM's metrics show the answers stopped at: most requests finished by length, and its histogram of
  generated tokens sums to that cap for each of those, plus at most the cap for each of the rest (16 is vLLM's own
  default);
- the model's generation_config.json (vLLM's "Using default ... sampling params from model: {'max_tokens': N}",
  a hard cap on 0.8 - 0.15), where an answer stopped at N whatever the request asked;
- a client's, harness's or trainer's own default (clients.py), where the paste shows it in use without another
  cap, and an answer stopped there or the cut is told;
- a round number (256, 512, ...) an answer stopped at, where the paste shows the request without max_tokens;
- a cap the paste sets (a wrapper's config, a harness's max_out_len), where the cut is told in words or vLLM's
  counter has most requests finished by length, nothing else explains it (no stop strings, no end-of-sequence token),
  and an answer stopped there or, with no count shown, the cap is short (at most SHORT_CAP tokens: a page of text),
  the counter tells the cut, or a harness sends it.
An answer that ended by itself (finish_reason "stop", and none "length") vetoes all of them (rules.vetoed)."""

import re

from kvtool.engine.diagnosis import clients
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED, WORDED, Fact, Facts
from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS

ROUND_CAPS = {2**power for power in range(4, 14)}  # the defaults servers and wrappers set: 16 to 8192 tokens
SHORT_CAP = 1024  # a cap this short cuts a long answer (about 750 words); longer ones need the count to tell
CATEGORY = "max_tokens_default_truncation"
CLIPPED = 0.5  # a trainer's clipped share above this: most completions reached the cap
FAR_BELOW = 4  # a count at a quarter of the context or less: no prompt filled the context
GENERATION_CONFIG, CLIENT_DEFAULT, STATED = "generation config", "client default", "stated cap"
FINISHED = "requests_finished_"  # vLLM's counter of finished requests, one quantity per finish reason (samples.py)
SERVER_DEFAULT = "server default"  # a client that sends no cap, so vLLM's /v1/completions default applies
# what else ends an answer early: stop strings, the end-of-sequence token, the chat template's end marker
OTHER_ENDS = re.compile(
    r"""\bstop(?:_token_ids|_sequences?|_words?)?['"]?\s*[=:]\s*\[\s*['"\d]|\bstop (?:sequence|string|word|token)s?\b"""
    r"|\bEOS\b|\beos_token|<\|(?:im_end|eot_id|end)\|>|chat template",
    re.IGNORECASE,
)


def default_cap(facts: Facts, context: LogContext) -> Observation | None:
    clipped = any(fact.value > CLIPPED for fact in facts.of("clipped_ratio"))
    stopped = "length" in finish_reasons(facts) or clipped or mostly_by_length(facts)
    if not (stopped or context.cut_told or context.score_drop_told):
        return None
    asked = {fact.value for fact in facts.of("max_tokens", (KEYED,))}
    completions = facts.of("completion_tokens")
    caps = (_vllm_default, _average_at_cap, _generation_config, _clipped_cap, _client_default, _round_cap, _stated_cap)
    for cap in caps:
        if (found := cap(facts, context, completions, asked, stopped)) is not None:
            return found
    return None


def finish_reasons(facts: Facts) -> set[str]:
    """The finish reasons the paste shows: an answer's finish_reason, or a reason vLLM's counter counted."""
    reasons = {str(fact.value).lower() for fact in facts.of("finish_reason")}
    return reasons | {reason for reason, count in _finished(facts).items() if count > 0}


def mostly_by_length(facts: Facts) -> bool:
    """Whether vLLM's counter of finished requests counts most of them as finished by length."""
    finished = _finished(facts)
    return finished.get("length", 0) > sum(finished.values()) / 2


def _finished(facts: Facts) -> dict[str, float]:
    """The requests counted as finished for each reason (the largest count shown: the counter only grows)."""
    return {
        name.removeprefix(FINISHED): found.value
        for name in (FINISHED + reason for reason in ("length", "stop", "abort"))
        if (found := facts.largest(name)) is not None
    }


def _observation(fact: Fact, cap: int, detail: str | None, completion: int | None = None) -> Observation:
    numbers = {"default_max_tokens": cap}
    if completion is not None:
        numbers["completion_tokens"] = completion
    evidence, span = evidence_window(fact.evidence, fact.span)
    return Observation(CATEGORY, "request", numbers, evidence, span, detail)


def _vllm_default(facts, context, completions, asked, stopped) -> Observation | None:
    for fact in completions:
        if fact.value == DEFAULT_MAX_TOKENS and DEFAULT_MAX_TOKENS not in asked:
            return _observation(fact, DEFAULT_MAX_TOKENS, None, fact.value)
    if context.cut_told and DEFAULT_MAX_TOKENS in asked:  # a request log shows vLLM's default reached the engine
        sent = next(fact for fact in facts.of("max_tokens", (KEYED,)) if fact.value == DEFAULT_MAX_TOKENS)
        return _observation(sent, DEFAULT_MAX_TOKENS, None)
    return None


def _average_at_cap(facts, context, completions, asked, stopped) -> Observation | None:
    """vLLM's metrics alone: most requests finished by length, and its histogram of generated tokens says they
    stopped at a round cap (16: its own default, for a client that sends none): the sum is what those cut generated
    at the cap, plus no more than the cap for each of the rest."""
    total, counted = facts.largest("generation_tokens_sum"), facts.largest("generation_requests")
    if not mostly_by_length(facts) or total is None or not counted or asked:
        return None
    # those cut generated the cap each, the rest no more: cut x cap <= sum <= counted x cap (one power of two fits)
    cut = _finished(facts)["length"]
    cap = next((cap for cap in sorted(ROUND_CAPS) if cut * cap <= total.value <= counted.value * cap), None)
    if cap is None:
        return None
    return _observation(total, cap, SERVER_DEFAULT if cap == DEFAULT_MAX_TOKENS else None, cap)


def _generation_config(facts, context, completions, asked, stopped) -> Observation | None:
    caps = {fact.value for fact in facts.of("server_max_tokens")}
    for fact in completions:
        if fact.value in caps:
            return _observation(fact, fact.value, GENERATION_CONFIG, fact.value)
    return None


def _client_default(facts, context, completions, asked, stopped) -> Observation | None:
    client = clients.BY_NAME.get(context.client or "")
    if client is None or not asked <= {client.default} or _stated(facts, client.default):
        return None
    at_cap = [fact for fact in completions if fact.value == client.default]
    told = context.cut_told or mostly_by_length(facts) or (client.harness and context.score_drop_told)
    if at_cap or (told and not completions):
        shown = at_cap[0] if at_cap else _cap_fact(facts) or _told_fact(context)
        detail = SERVER_DEFAULT if client.sends_none else CLIENT_DEFAULT
        return _observation(shown, client.default, detail, client.default if at_cap else None)
    return None


def _clipped_cap(facts, context, completions, asked, stopped) -> Observation | None:
    """A trainer's metrics: most completions clipped, the longest at a round length (the generation cap it set)."""
    if not any(fact.value > CLIPPED for fact in facts.of("clipped_ratio")):
        return None
    longest = [fact for fact in facts.of("longest_completion") if fact.value in ROUND_CAPS]
    return _observation(longest[-1], longest[-1].value, None, longest[-1].value) if longest else None


def _round_cap(facts, context, completions, asked, stopped) -> Observation | None:
    """Answers that stopped for length at a round number, where the paste sends no max_tokens: the request shown,
    the same count on every row of a log, or a count far below the context (no prompt filled it) or told cut."""
    if not stopped or asked:
        return None
    at_round = [fact for fact in completions if fact.value in ROUND_CAPS and not _context_full(facts, fact)]
    if not at_round or len({fact.value for fact in completions}) > 1:
        return None
    cap, limit = at_round[0], context.max_model_len
    rows = len({fact.line for fact in at_round})
    if facts.of("model", (KEYED,)) or rows > 1 or context.cut_told or (limit and cap.value * FAR_BELOW <= limit):
        return _observation(cap, cap.value, None, cap.value)
    return None


def _context_full(facts: Facts, completion: Fact) -> bool:
    """Whether the prompt beside this completion filled the context (then the context ended it, not a cap)."""
    limit = facts.setting("max_model_len")
    prompts = [fact.value for fact in facts.of("prompt_tokens") if fact.line == completion.line]
    return bool(limit and prompts and prompts[0] + completion.value >= limit.value)


def _stated_cap(facts, context, completions, asked, stopped) -> Observation | None:
    cap, counted = _cap_fact(facts), mostly_by_length(facts)  # vLLM counted most requests as cut: no need to tell
    if cap is None or not (context.cut_told or counted) or any(OTHER_ENDS.search(fact.evidence) for fact in facts):
        return None
    at_cap = [fact for fact in completions if fact.value == cap.value]
    client = clients.BY_NAME.get(context.client or "")
    harness = client is not None and client.harness  # it sends its cap with every request, however long
    if at_cap or (not completions and (0 < cap.value <= SHORT_CAP or counted or harness)):
        return _observation(cap, cap.value, STATED, cap.value if at_cap else None)
    return None


def _cap_fact(facts: Facts) -> Fact | None:
    """The output cap the paste sets (a request's, a wrapper's config, a harness's or a trainer's)."""
    for name in ("max_tokens", "max_response_length"):
        if (fact := facts.setting(name)) is not None and isinstance(fact.value, int):
            return fact
    return None


def _stated(facts: Facts, default: int) -> bool:
    """Whether the paste sets an output cap other than the client's default."""
    cap = _cap_fact(facts)
    return cap is not None and cap.value != default


def _told_fact(context: LogContext) -> Fact:
    """The line that tells the cut (else the one that shows the client), as a fact to show."""
    line = context.cut_told or context.score_drop_told or context.client_line or ""
    return Fact("completion_tokens", 0, None, 0, line, (0, len(line)), WORDED)
