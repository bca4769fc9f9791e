"""Per-request length checks with vLLM's messages, and the overflow policy.

`check_request_length` is the plain check (diagnose and plan explain a length with it);
`check_max_tokens`, `check_prompt_characters` and `output_budget` are what the engine's InputProcessor runs
for every request, in vLLM 0.33's order: 0.33's rules under the `clamp` policy, 0.31's under `reject`,
with the " (parameter=..., value=...)" suffix of vLLM's validation errors.
"""

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.defaults import DEFAULT_OVERFLOW
from kvtool.errors import KvtoolError


class RequestTooLongError(KvtoolError):
    """A request that cannot fit max_model_len; `param` names the field to change (HTTP 400 `param`)."""

    def __init__(self, message: str, param: str, prompt_tokens: int, max_tokens: int | None, max_model_len: int):
        super().__init__(message)
        self.param = param
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.max_model_len = max_model_len


def check_request_length(
    prompt_tokens: int, max_tokens: int | None, max_model_len: int, overflow: str = DEFAULT_OVERFLOW
) -> int:
    """The max_tokens to run with, or RequestTooLongError.

    `reject` refuses prompt + max_tokens > max_model_len like vLLM <= 0.31; `clamp` lowers max_tokens
    to the room left like vLLM >= 0.32. A prompt that alone fills the context is always refused.
    """
    facts = (prompt_tokens, max_tokens, max_model_len)
    values = dict(prompt_tokens=prompt_tokens, max_tokens=max_tokens, max_model_len=max_model_len, qualifier="")
    if prompt_tokens > max_model_len:
        raise RequestTooLongError(messages.PROMPT_TOO_LONG.format(**values), "input_tokens", *facts)
    if prompt_tokens == max_model_len:
        raise RequestTooLongError(messages.NO_ROOM_FOR_OUTPUT.format(**values), "input_tokens", *facts)
    room = max_model_len - prompt_tokens
    if max_tokens is None:
        return room
    if max_tokens < 1:
        raise RequestTooLongError(messages.MAX_TOKENS_BELOW_ONE.format(**values), "max_tokens", *facts)
    if max_tokens > max_model_len:
        raise RequestTooLongError(
            messages.MAX_TOKENS_TOO_LARGE.format(param="max_tokens", **values), "max_tokens", *facts
        )
    if max_tokens > room and overflow == "reject":
        raise RequestTooLongError(
            messages.TOTAL_TOO_LONG.format(total_tokens=prompt_tokens + max_tokens, **values), "input_tokens", *facts
        )
    return min(max_tokens, room)


def check_max_tokens(requested: int | None, max_model_len: int, param: str = "max_tokens") -> None:
    """vLLM 0.31+'s first check: max_tokens (or max_completion_tokens, named as sent) above max_model_len."""
    if requested is not None and requested > max_model_len:
        message = messages.MAX_TOKENS_TOO_LARGE.format(param=param, max_tokens=requested, max_model_len=max_model_len)
        raise RequestTooLongError(
            messages.with_parameter(message, param, requested), param, 0, requested, max_model_len
        )


def max_input_tokens(requested: int | None, max_model_len: int, overflow: str) -> int:
    """The prompt tokens allowed: all of max_model_len under `clamp` (0.32+), what max_tokens leaves under `reject`."""
    return max_model_len - (requested or 0) if overflow == "reject" else max_model_len


def check_prompt_characters(
    prompt_characters: int, requested: int | None, max_model_len: int, overflow: str, max_chars_per_token: int
) -> None:
    """vLLM's check before tokenizing a text prompt: more characters than max input tokens x the longest token."""
    max_input = max_input_tokens(requested, max_model_len, overflow)
    if prompt_characters <= max_input * max_chars_per_token:
        return
    template = messages.TOTAL_CHARS_TOO_LONG if overflow == "reject" else messages.PROMPT_CHARS_TOO_LONG
    message = template.format(
        prompt_characters=prompt_characters,
        max_input_characters=max_input * max_chars_per_token,
        max_input_tokens=max_input,
        max_model_len=max_model_len,
        max_tokens=requested or 0,
    )
    raise RequestTooLongError(
        messages.with_parameter(message, "input_text", prompt_characters), "input_text", 0, requested, max_model_len
    )


def output_budget(
    prompt_tokens: int, requested: int | None, max_model_len: int, overflow: str = DEFAULT_OVERFLOW, text: bool = False
) -> int:
    """The max_tokens a request runs with, or RequestTooLongError in vLLM 0.33's words (0.31's under `reject`).

    `text` says the prompt was text: vLLM tokenizes text only one token past the limit, so it reports "at least
    N+1" tokens. The messages carry vLLM's " (parameter=..., value=...)" suffix.
    """
    facts = (prompt_tokens, requested, max_model_len)
    max_input = max_input_tokens(requested, max_model_len, overflow)
    if prompt_tokens > max_input:
        count = min(prompt_tokens, max_input + 1) if text else prompt_tokens
        qualifier = "at least " if text and count == max_input + 1 else ""
        template = messages.TOTAL_TOO_LONG if overflow == "reject" else messages.PROMPT_TOO_LONG
        message = template.format(
            prompt_tokens=count,
            qualifier=qualifier,
            total_tokens=count + (requested or 0),
            max_model_len=max_model_len,
            max_tokens=requested or 0,
        )
        raise RequestTooLongError(messages.with_parameter(message, "input_tokens", count), "input_tokens", *facts)
    room = max_model_len - prompt_tokens
    value = room if requested is None else min(requested, room)
    if value < 1:  # vLLM 0.32+: the budget is clamped to 0, which SamplingParams then refuses
        message = messages.MAX_TOKENS_BELOW_ONE.format(max_tokens=value)
        raise RequestTooLongError(messages.with_parameter(message, "max_tokens", value), "max_tokens", *facts)
    return value
