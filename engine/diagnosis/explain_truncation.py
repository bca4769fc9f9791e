"""An answer cut at an output cap, explained by where the cap came from (caps.py): vLLM's 16 tokens
(SamplingParams and /v1/completions), the model's generation_config.json, a client's or a trainer's own default
(clients.py), a cap the paste sets, or an unknown default of a request that sends no max_tokens."""

import re

from kvtool.engine.diagnosis import clients
from kvtool.engine.diagnosis.caps import CLIENT_DEFAULT, GENERATION_CONFIG, SERVER_DEFAULT, STATED
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import KEYED
from kvtool.engine.diagnosis.findings import Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.truncation import NOT_SET_DETAIL
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS

VLLM_DEFAULT = (
    'The output stopped at exactly 16 tokens (finish_reason "length"): max_tokens was not set and vLLM\'s default is '
    "16 for /v1/completions and SamplingParams."
)
SUMMARIES = {  # by what was read
    "max_tokens": "SamplingParams is built without max_tokens, so every output stops at vLLM's default of 16 "
    'tokens (finish_reason "length").',
    NOT_SET_DETAIL: "The answers are cut short and no max_tokens is sent, so a default cap ends them: vLLM's is 16 "
    "tokens for /v1/completions and SamplingParams (LLM.generate without SamplingParams too), and servers in front "
    "of vLLM (Xinference, Dynamo, MLServer, LangChain's wrappers) set their own.",
    GENERATION_CONFIG: 'The answers stop at {cap} tokens (finish_reason "length") whatever max_tokens a request '
    "sends: the model's generation_config.json sets max_new_tokens {cap}, which vLLM 0.8 to 0.15 applies as a cap "
    "on every request (from 0.17 only as the default of a request that sends none).",
    CLIENT_DEFAULT: "The answers stop at {cap} tokens: {client} sends {param}={cap} when none is set (its own "
    "default, not vLLM's).",
    SERVER_DEFAULT: "The answers stop at {cap} tokens: {client} sends no max_tokens when none is set, so vLLM's "
    "/v1/completions default of {cap} applies.",
    STATED: "The answers are cut at the output cap the paste sets: {param} {cap} tokens, too short for them.",
    "round": 'The output stopped at exactly {cap} tokens (finish_reason "length") and the request sends no '
    "max_tokens: a default of the client or of a server in front of vLLM ended it (LangChain's completion classes "
    "send 256).",
}
WRAPPER_FIX = Fix(
    "or set it where the client or the server in front of vLLM takes its model settings", param="max_tokens", value=None
)
_KEY_BEFORE = re.compile(r"""([A-Za-z_][\w.-]*)['"]?\s*[:=(]?\s*['"]?$""")


def _told(n: dict, context: LogContext) -> None:
    """What the paste tells of the cut answers besides the sign read: the tokens they got and their prompts', the
    max_tokens a request sent that did not take (a wrapper dropped it, an endpoint ignored the field), and vLLM's
    default where the cut is at it."""
    for name in ("completion_tokens", "prompt_tokens"):
        if name not in n and (found := context.facts.setting(name)):
            n[name] = found.value
    got, cap = n.get("completion_tokens", 0), n.get("default_max_tokens")
    sent = [fact.value for fact in context.facts.of("max_tokens", (KEYED,)) if fact.value > got and fact.value != cap]
    if sent and "max_tokens" not in n:
        n["max_tokens_sent"] = sent[-1]
    if DEFAULT_MAX_TOKENS in (n.get("completion_tokens"), n.get("max_tokens")):
        n.setdefault("default_max_tokens", DEFAULT_MAX_TOKENS)


def default_truncation(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    _told(n, context)
    detail = _source(obs, n, context)
    if context.max_model_len:
        n["max_model_len"] = context.max_model_len
        if "prompt_tokens" in n:
            n["largest_max_tokens"] = context.max_model_len - n["prompt_tokens"]
    client = clients.BY_NAME.get(context.client or "")
    param = _param(obs, detail, client)
    summary = _summary(detail, n, client, param)
    return Finding(obs.category, obs.stage, summary, n, _fixes(detail, n, param), obs.evidence, obs.span)


def _source(obs: Observation, n: dict, context: LogContext) -> str:
    """Where the cap came from: caps.py's detail, vLLM's default, a client's where the paste shows one, or unknown."""
    client = clients.BY_NAME.get(context.client or "")
    if obs.detail in (GENERATION_CONFIG, CLIENT_DEFAULT, SERVER_DEFAULT, STATED):
        return obs.detail
    if n.get("default_max_tokens") == DEFAULT_MAX_TOKENS or n.get("max_tokens") == DEFAULT_MAX_TOKENS:
        return "max_tokens" if "completion_tokens" not in n else "vllm"
    shown = (n.get("max_tokens_sent", client.default), n.get("completion_tokens", client.default)) if client else ()
    if client is not None and shown == (client.default, client.default):  # an answer that stopped elsewhere: not it
        n["default_max_tokens"] = client.default
        return CLIENT_DEFAULT
    return NOT_SET_DETAIL if obs.detail == NOT_SET_DETAIL or "default_max_tokens" not in n else "round"


def _param(obs: Observation, detail: str, client: clients.Client | None) -> str:
    """The setting the fix changes: the client's, or the key the paste sets the cap with."""
    if detail in (CLIENT_DEFAULT, SERVER_DEFAULT) and client is not None:
        return client.param
    key = _KEY_BEFORE.search(obs.evidence[: obs.span[0]]) if detail == STATED else None
    return key.group(1) if key else "max_tokens"


def _summary(detail: str, n: dict, client: clients.Client | None, param: str) -> str:
    if detail == "vllm":
        return VLLM_DEFAULT
    cap = n.get("default_max_tokens")
    return SUMMARIES[detail].format(cap=cap, client=client.name if client else "the client", param=param)


def _fixes(detail: str, n: dict, param: str) -> list[Fix]:
    longest = n.get("largest_max_tokens")
    if detail == GENERATION_CONFIG:
        wanted = n.get("max_tokens_sent") or longest
        return [
            Fix("serve without the model's generation defaults", flag="--generation-config", value="vllm"),
            Fix(
                "or keep them and lift the cap",
                flag="--override-generation-config",
                value=f'{{"max_new_tokens": {wanted}}}' if wanted else None,
            ),
            Fix("or raise max_new_tokens in the model's generation_config.json", param="max_new_tokens", value=wanted),
        ]
    if detail in (CLIENT_DEFAULT, SERVER_DEFAULT, STATED):
        return [Fix(f"raise {param} to the length you expect", param=param, value=longest)]
    fixes = [
        Fix("set max_tokens on every request to the length you expect", param="max_tokens", value=longest),
        Fix(
            "use /v1/chat/completions, whose default is the room left in the context",
            param="endpoint",
            value="/v1/chat/completions",
        ),
    ]
    if detail in (NOT_SET_DETAIL, "round"):
        fixes.insert(1, WRAPPER_FIX)
    return fixes
