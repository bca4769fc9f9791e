"""Per-request length checks with vLLM's messages, and the overflow policy.

`check_request_length` is the engine's check on token ids (offline and server alike);
`server_output_budget` is what vLLM's HTTP server does before a request reaches the engine: 0.33's
rules under the `clamp` policy, 0.31's under `reject`, with the " (parameter=..., value=...)" suffix.
"""

from kvtool.engine.sizing import messages
from kvtool.errors import KvtoolError


class RequestTooLongError(KvtoolError):
    """A request that cannot fit max_model_len; `param` names the field to change (HTTP 400 `param`)."""

    def __init__(self, message: str, param: str, prompt_tokens: int, max_tokens: int | None, max_model_len: int):
        super().__init__(message)
        self.param = param
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.max_model_len = max_model_len


def check_request_length(prompt_tokens: int, max_tokens: int | None, max_model_len: int,
                         overflow: str = "reject") -> int:
    """The max_tokens to run with, or RequestTooLongError.

    `reject` refuses prompt + max_tokens > max_model_len like vLLM <= 0.31; `clamp` lowers max_tokens
    to the room left like vLLM >= 0.32. A prompt that alone fills the context is always refused.
    """
    facts = (prompt_tokens, max_tokens, max_model_len)
    values = dict(prompt_tokens=prompt_tokens, max_tokens=max_tokens, max_model_len=max_model_len, at_least="")
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
        raise RequestTooLongError(messages.MAX_TOKENS_TOO_LARGE.format(param="max_tokens", **values), "max_tokens", *facts)
    if max_tokens > room and overflow == "reject":
        raise RequestTooLongError(messages.TOTAL_TOO_LONG.format(total_tokens=prompt_tokens + max_tokens, **values),
                                  "input_tokens", *facts)
    return min(max_tokens, room)


def server_output_budget(prompt_tokens: int, requested: int | None, max_model_len: int, overflow: str = "clamp",
                         param: str = "max_tokens", prompt_chars: int | None = None,
                         max_chars_per_token: int | None = None) -> int:
    """The max_tokens a server request runs with, or RequestTooLongError in vLLM's words.

    `prompt_chars` is the length of a text prompt (None for token ids): vLLM checks characters
    first, and tokenizes text only one token past the limit, so it reports "at least N+1" tokens.
    """
    facts = (prompt_tokens, requested, max_model_len)
    if requested is not None and requested > max_model_len:
        message = messages.MAX_TOKENS_TOO_LARGE.format(param=param, max_tokens=requested, max_model_len=max_model_len)
        raise RequestTooLongError(messages.with_parameter(message, param, requested), param, *facts)
    reject = overflow == "reject"
    max_input = max_model_len - (requested or 0) if reject else max_model_len
    values = dict(max_model_len=max_model_len, max_tokens=requested or 0, max_input_tokens=max_input)
    if prompt_chars is not None and max_chars_per_token and prompt_chars > max_input * max_chars_per_token:
        template = messages.TOTAL_CHARS_TOO_LONG if reject else messages.PROMPT_CHARS_TOO_LONG
        message = template.format(prompt_chars=prompt_chars, max_input_chars=max_input * max_chars_per_token, **values)
        raise RequestTooLongError(messages.with_parameter(message, "input_text", prompt_chars), "input_text", *facts)
    if prompt_tokens > max_input:
        count = min(prompt_tokens, max_input + 1) if prompt_chars is not None else prompt_tokens
        at_least = "at least " if count == max_input + 1 else ""
        template = messages.TOTAL_TOO_LONG if reject else messages.PROMPT_TOO_LONG
        message = template.format(prompt_tokens=count, at_least=at_least, total_tokens=count + (requested or 0),
                                  **values)
        raise RequestTooLongError(messages.with_parameter(message, "input_tokens", count), "input_tokens", *facts)
    room = max_model_len - prompt_tokens
    value = room if requested is None else min(requested, room)
    if value < 1:  # vLLM 0.32+: the budget is clamped to 0, which SamplingParams then refuses
        message = messages.MAX_TOKENS_BELOW_ONE.format(max_tokens=value)
        raise RequestTooLongError(messages.with_parameter(message, "max_tokens", value), "max_tokens", *facts)
    return value
