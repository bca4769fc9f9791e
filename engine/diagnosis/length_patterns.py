"""Request-length failures, vLLM 0.4 → 0.33 (facts §1, §6): every wording of "too long", and the
16-token default. The order matters: the first pattern that matches a line wins."""

from kvtool.engine.diagnosis.patterns import Pattern, compile_

_CONTEXT = r"maximum context length is (?P<max_model_len>\d+) tokens\. However, "
_PROMPT = r"(?:at least )?(?P<prompt_tokens>\d+)"


def _too_long(gate: str, regex: str) -> Pattern:
    return Pattern("request_too_long", "request", gate, compile_(regex))


REQUEST_TOO_LONG = [
    # 0.4–0.9 (A2, A1, A3)
    _too_long("maximum context length", _CONTEXT + r"you requested (?P<requested_tokens>\d+) tokens \((?P<prompt_tokens>\d+) in the messages, (?P<max_tokens>\d+) in the completion\)"),
    _too_long("maximum context length", _CONTEXT + r"you requested (?P<prompt_tokens>\d+) tokens in the (?:messages|input)"),
    # 0.18–0.31 (D1, D2)
    _too_long("maximum context length", _CONTEXT + r"you requested (?P<max_tokens>\d+) output tokens and your prompt contains " + _PROMPT + r" input tokens(?:, for a total of (?P<requested_tokens>\d+) tokens)?"),
    _too_long("maximum context length", _CONTEXT + r"you requested (?P<max_tokens>\d+) output tokens and your prompt contains (?P<prompt_characters>\d+) characters \(more than (?P<max_input_characters>\d+) characters, which is the upper bound for (?P<max_input_tokens>\d+) input tokens\)"),
    # 0.32+ (E1, E2)
    _too_long("maximum context length", _CONTEXT + r"your prompt contains " + _PROMPT + r" input tokens, which exceeds"),
    _too_long("maximum context length", _CONTEXT + r"your prompt contains (?P<prompt_characters>\d+) characters \(more than (?P<max_input_characters>\d+) characters, which is the upper bound for (?P<max_input_tokens>\d+) input tokens\)"),
    # 0.10.1–0.15 (B2 first: it also says "your request has")
    _too_long("max_completion_tokens' is too large", r"'max_tokens' or 'max_completion_tokens' is too large: (?P<max_tokens>\d+)\. This model's maximum context length is (?P<max_model_len>\d+) tokens and your request has (?P<prompt_tokens>\d+) input tokens"),
    _too_long("maximum context length", _CONTEXT + r"your request has (?P<prompt_tokens>\d+) input tokens"),
    _too_long("cannot be greater than the model", r"'max_tokens' \((?P<max_tokens>\d+)\) cannot be greater than the model's maximum context length \((?P<max_model_len>\d+)\)"),
    # 0.16–0.17 (C1, C2)
    _too_long("maximum input length", r"You passed (?P<prompt_tokens>\d+) input tokens and requested (?P<max_tokens>\d+) output tokens\. However, the model's context length is only (?P<max_model_len>\d+) tokens"),
    _too_long("maximum input length", r"You passed (?P<prompt_characters>\d+) input characters and requested (?P<max_tokens>\d+) output tokens\. However, the model's context length is only (?P<max_model_len>\d+) tokens, resulting in a maximum input length of (?P<max_input_tokens>\d+) tokens \(at most (?P<max_input_characters>\d+) characters\)"),
    # 0.17–0.33 (C3, D3, E3: "max_tokens=5000cannot be greater than max_model_len=max_total_tokens=4096")
    _too_long("cannot be greater than max_model_len", r"(?:max_tokens|max_completion_tokens)=(?P<max_tokens>\d+)\s*cannot be greater than max_model_len=(?:max_total_tokens=)?(?P<max_model_len>\d+)"),
    _too_long("truncate_prompt_tokens", r"truncate_prompt_tokens=(?P<truncate_prompt_tokens>\d+) cannot be greater than max_model_len - \w+ = (?P<max_input_tokens>\d+)"),
    # E4, E5
    _too_long("exceeds model's maximum context length", r"Input length \((?P<prompt_tokens>\d+)\) exceeds model's maximum context length \((?P<max_model_len>\d+)\)"),
    _too_long("exceeds the max_model_len", r"The engine prompt length (?P<prompt_tokens>\d+) exceeds the max_model_len (?P<max_model_len>\d+)"),
    # engine-level (F1, F2) and the v0 multimodal variant
    _too_long("maximum model length", r"The (?:decoder|encoder) prompt \(length (?P<prompt_tokens>\d+)\) (?:plus the number of requested output tokens \(at least 1\) )?is longer than the maximum model length of (?P<max_model_len>\d+)"),
    _too_long("too long to fit", r"The prompt \(total length (?P<prompt_tokens>\d+)\) is too long to fit into the model \(context length (?P<max_model_len>\d+)\)"),
    # v0 scheduler warnings (G): the request is dropped with finish_reason "length"
    _too_long("is too long and exceeds limit", r"Input prompt \((?P<prompt_tokens>\d+) tokens\) is too long and exceeds limit of (?P<max_model_len>\d+)"),
    _too_long("too long and exceeds the capacity", r"Input prompt \((?P<prompt_tokens>\d+) tokens\) \+ lookahead slots \((?P<lookahead_slots>\d+)\) is too long and exceeds the capacity of block_manager"),
    # 0.4-era chat: max_tokens = max_model_len - prompt came out negative
    _too_long("max_tokens must be at least 1", r"max_tokens must be at least 1, got (?P<max_tokens>-?\d+)"),
]

DEFAULT_TRUNCATION = [
    Pattern("max_tokens_default_truncation", "request", "max_tokens=16",
            compile_(r"SamplingParams\([^)]{0,4000}?\bmax_tokens=16[,)]")),
]
PATTERNS = REQUEST_TOO_LONG + DEFAULT_TRUNCATION
