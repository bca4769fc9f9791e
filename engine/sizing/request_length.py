"""Per-request length checks with vLLM's messages, and the overflow policy.

`check_request_length` is the plain check (diagnose and plan explain a length with it);
`check_max_tokens`, `check_prompt_characters` (before tokenizing) and `decide_max_tokens` (after) are what the
engine's InputProcessor runs for every request, in vLLM 0.33's order: 0.33's rules under the `clamp` policy,
0.31's under `reject`, with the " (parameter=..., value=...)" suffix of vLLM's validation errors.

A request's max_tokens is decided here for every route: each route describes its field as a `MaxTokensField`
(the value as sent, the field's name, the route's default, echo), the server adds the serving profile's default,
and `decide_max_tokens` fixes the value the request runs with once its prompt is known. Callers reach it as
`request_length.decide_max_tokens`, so that a test can follow one value from it to where generation stops.
"""

from dataclasses import dataclass

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


RESPONSES_FIELD = "max_output_tokens"  # vLLM lowers it to max_model_len where it refuses the others above it


@dataclass(frozen=True)
class MaxTokensField:
    """A request's output-length field as its route reads it, before anything is decided."""

    value: int | None = None  # as sent (None: the rest of the context)
    name: str = "max_tokens"  # max_tokens, max_completion_tokens (chat) or max_output_tokens (Responses)
    sent: bool = True  # False: the request left it out, and a default applies
    route_default: int | None = None  # the route's own when none is sent: /v1/completions' 16 (vLLM)
    echo_only: bool = False  # /v1/completions' echo with max_tokens 0: the prompt scored, one token sampled
    profile_default: int | None = None  # the serving profile's, for a request that sent none (before the route's)

    def requested(self, max_model_len: int) -> int | None:
        """What the request asks for before its prompt is known (SamplingParams and the checks before tokenizing
        read it); None: decided from the room left (lowered to it, with the profile's default)."""
        if self.echo_only:
            return 1  # the token sampled is not shown
        if not self.sent:
            return None if self.profile_default is not None else self.route_default
        if self.name == RESPONSES_FIELD and self.value is not None:
            return min(self.value, max_model_len)
        return self.value

    @property
    def default_max_tokens(self) -> int | None:
        """The profile's default where it applies: to a request that sent none."""
        return None if self.sent else self.profile_default


@dataclass(frozen=True)
class MaxTokens:
    """The max_tokens a request runs with (`value`), and what it asked for."""

    value: int
    requested: int | None  # the request's max_tokens, or the profile default lowered to the room; None: the rest

    @property
    def clamped(self) -> bool:
        """Lowered to the room left by the `clamp` policy."""
        return self.requested is not None and self.value < self.requested


def decide_max_tokens(
    prompt_tokens: int,
    max_model_len: int,
    requested: int | None,
    default_max_tokens: int | None = None,
    overflow: str = DEFAULT_OVERFLOW,
    text: bool = False,
) -> MaxTokens:
    """The max_tokens a request runs with, as vLLM's get_max_tokens decides it in one min(): the request's value,
    else the serving profile's default, else the room left (max_model_len - prompt), never more than that room.

    A profile's default is lowered to the room, never refused; a request's value over the room is lowered under
    `clamp` (vLLM 0.32+) and refused under `reject` (vLLM <= 0.31). RequestTooLongError in vLLM's words, with the
    " (parameter=..., value=...)" suffix; `text` says the prompt was text (see `_prompt_too_long`).
    """
    room = max_model_len - prompt_tokens
    if requested is None and default_max_tokens is not None:
        requested = min(default_max_tokens, max(room, 1))
    if prompt_tokens > max_input_tokens(requested, max_model_len, overflow):
        raise _prompt_too_long(prompt_tokens, requested, max_model_len, overflow, text)
    value = room if requested is None else min(requested, room)
    if value < 1:  # vLLM 0.32+: the budget is clamped to 0, which SamplingParams then refuses
        message = messages.MAX_TOKENS_BELOW_ONE.format(max_tokens=value)
        raise RequestTooLongError(
            messages.with_parameter(message, "max_tokens", value), "max_tokens", prompt_tokens, requested, max_model_len
        )
    return MaxTokens(value, requested)


def _prompt_too_long(
    prompt_tokens: int, requested: int | None, max_model_len: int, overflow: str, text: bool
) -> RequestTooLongError:
    """vLLM tokenizes a text prompt only one token past the limit, so it reports "at least N+1" tokens."""
    max_input = max_input_tokens(requested, max_model_len, overflow)
    count = min(prompt_tokens, max_input + 1) if text else prompt_tokens
    template = messages.TOTAL_TOO_LONG if overflow == "reject" else messages.PROMPT_TOO_LONG
    message = template.format(
        prompt_tokens=count,
        qualifier="at least " if text and count == max_input + 1 else "",
        total_tokens=count + (requested or 0),
        max_model_len=max_model_len,
        max_tokens=requested or 0,
    )
    return RequestTooLongError(
        messages.with_parameter(message, "input_tokens", count), "input_tokens", prompt_tokens, requested, max_model_len
    )
