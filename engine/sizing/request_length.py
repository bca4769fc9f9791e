"""Per-request length checks with vLLM's messages (facts §1.2), and the overflow policy."""

from kvtool.errors import KvtoolError

OVERFLOW_POLICIES = ("reject", "clamp")


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
    if prompt_tokens > max_model_len:
        raise RequestTooLongError(prompt_too_long_message(prompt_tokens, max_model_len), "input_tokens", *facts)
    if prompt_tokens == max_model_len:
        raise RequestTooLongError(no_room_message(prompt_tokens, max_model_len), "input_tokens", *facts)
    room = max_model_len - prompt_tokens
    if max_tokens is None:
        return room
    if max_tokens < 1:
        raise RequestTooLongError(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", *facts)
    if max_tokens > max_model_len:
        raise RequestTooLongError(max_tokens_too_large_message(max_tokens, max_model_len), "max_tokens", *facts)
    if max_tokens > room and overflow == "reject":
        raise RequestTooLongError(total_too_long_message(prompt_tokens, max_tokens, max_model_len), "input_tokens", *facts)
    return min(max_tokens, room)


def prompt_too_long_message(prompt_tokens: int, max_model_len: int) -> str:
    """vLLM 0.33 (E1)."""
    return (f"This model's maximum context length is {max_model_len} tokens. However, your prompt contains "
            f"{prompt_tokens} input tokens, which exceeds this limit even without any output tokens. "
            "Please reduce the length of the input prompt.")


def no_room_message(prompt_tokens: int, max_model_len: int) -> str:
    """vLLM 0.33 engine check (F2): a prompt of exactly max_model_len leaves no room for one output token."""
    return (f"The decoder prompt (length {prompt_tokens}) plus the number of requested output tokens (at least 1) "
            f"is longer than the maximum model length of {max_model_len}. Make sure that `max_model_len` is no "
            "smaller than the number of text tokens (prompt + requested output tokens).")


def max_tokens_too_large_message(max_tokens: int, max_model_len: int, param: str = "max_tokens") -> str:
    """vLLM 0.31+ (D3 / E3)."""
    return f"{param}={max_tokens} cannot be greater than max_model_len={max_model_len}. Please request fewer output tokens."


def total_too_long_message(prompt_tokens: int, max_tokens: int, max_model_len: int) -> str:
    """vLLM 0.18-0.31 (D1)."""
    return (f"This model's maximum context length is {max_model_len} tokens. However, you requested {max_tokens} "
            f"output tokens and your prompt contains {prompt_tokens} input tokens, for a total of "
            f"{prompt_tokens + max_tokens} tokens. Please reduce the length of the input prompt or the number of "
            "requested output tokens.")
