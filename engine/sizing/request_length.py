"""Per-request length checks with vLLM's messages, and the overflow policy."""

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
    values = dict(prompt_tokens=prompt_tokens, max_tokens=max_tokens, max_model_len=max_model_len)
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
