"""The default output cap: vLLM's 16 tokens (SamplingParams and /v1/completions), or a wrapper's own when a
request sends no max_tokens."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED
from kvtool.engine.diagnosis.findings import Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.truncation import NOT_SET_DETAIL
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS

SUMMARIES = {  # by what was read
    "completion_tokens": 'The output stopped at exactly 16 tokens (finish_reason "length"): max_tokens was not set and '
    "vLLM's default is 16 for /v1/completions and SamplingParams.",
    "max_tokens": "SamplingParams is built without max_tokens, so every output stops at vLLM's default of 16 "
    'tokens (finish_reason "length").',
    NOT_SET_DETAIL: "The answers are cut short and no max_tokens is sent, so a default cap ends them: vLLM's is 16 "
    "tokens for /v1/completions and SamplingParams (LLM.generate without SamplingParams too), and servers in front "
    "of vLLM (Xinference, Dynamo, MLServer, LangChain's wrappers) set their own.",
    None: "Requests run with max_tokens=16, vLLM's default when a /v1/completions request or SamplingParams omits it.",
}
WRAPPER_FIX = Fix(
    "or set it where the client or the server in front of vLLM takes its model settings", param="max_tokens", value=None
)


def _told(n: dict, context: LogContext) -> None:
    """What the paste tells of the cut answers besides the sign read: the tokens they got and their prompts', the
    max_tokens a request sent that did not take (a wrapper dropped it, an endpoint ignored the field), and vLLM's
    default where the cut is at it."""
    for name in ("completion_tokens", "prompt_tokens"):
        if name not in n and (found := context.facts.setting(name)):
            n[name] = found.value
    sent = [fact.value for fact in context.facts.of("max_tokens", (KEYED,)) if fact.value > 0]
    if sent and n.get("completion_tokens", 0) < min(sent) and "max_tokens" not in n:
        n["max_tokens_sent"] = sent[-1]
    if DEFAULT_MAX_TOKENS in (n.get("completion_tokens"), n.get("max_tokens")):
        n["default_max_tokens"] = DEFAULT_MAX_TOKENS


def default_truncation(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    _told(n, context)
    if context.max_model_len and "prompt_tokens" in n:
        n["largest_max_tokens"] = context.max_model_len - n["prompt_tokens"]
    read = next((key for key in ("completion_tokens", "max_tokens") if key in n), obs.detail)
    fixes = [
        Fix(
            "set max_tokens on every request to the length you expect",
            param="max_tokens",
            value=n.get("largest_max_tokens"),
        ),
        Fix(
            "use /v1/chat/completions, whose default is the room left in the context",
            param="endpoint",
            value="/v1/chat/completions",
        ),
    ]
    if read == NOT_SET_DETAIL:
        fixes.insert(1, WRAPPER_FIX)
    return Finding(obs.category, obs.stage, SUMMARIES[read], n, fixes, obs.evidence, obs.span)
