"""Client-side token budgeting: the max_tokens to send so a request fits the server's max_model_len.

from kvtool.budget import budget_max_tokens
max_tokens = budget_max_tokens(prompt_tokens=3500, max_model_len=4096, desired_max_tokens=1024, safety_margin=16)
# -> 580: the 1024 wanted do not fit, the room left (minus the margin) does
"""

import math

from kvtool.errors import UsageError


class PromptTooLongError(UsageError):
    """The prompt alone (plus the safety margin) leaves no room for one output token."""

    def __init__(self, prompt_tokens: int, max_model_len: int, margin: int):
        excess = prompt_tokens + margin + 1 - max_model_len
        super().__init__(
            f"the prompt has {prompt_tokens} tokens and max_model_len is {max_model_len}"
            + (f" (with a safety margin of {margin})" if margin else "")
            + ": no room for any output.",
            f"Shorten the prompt by at least {excess} tokens, or serve with a larger max_model_len.",
        )
        self.prompt_tokens = prompt_tokens
        self.max_model_len = max_model_len
        self.margin = margin


def safety_tokens(prompt_tokens: int, safety_margin: int | float) -> int:
    """A margin in tokens; a float below 1 is a share of the prompt (client and server tokenizers may disagree)."""
    if safety_margin < 0:
        raise UsageError(f"safety margin must not be negative, got {safety_margin}.", "Use 0 or more.")
    if isinstance(safety_margin, float) and safety_margin < 1:
        return math.ceil(prompt_tokens * safety_margin)
    return int(safety_margin)


def budget_max_tokens(
    prompt_tokens: int, max_model_len: int, desired_max_tokens: int | None = None, safety_margin: int | float = 0
) -> int:
    """The max_tokens to send: the desired value if it fits, else the room left after the prompt and the margin."""
    if prompt_tokens < 0 or max_model_len < 1:
        raise UsageError(
            f"need prompt_tokens >= 0 and max_model_len >= 1 (got {prompt_tokens}, {max_model_len}).",
            "Pass the prompt's token count and the server's max_model_len.",
        )
    if desired_max_tokens is not None and desired_max_tokens < 1:
        raise UsageError(f"desired max_tokens must be at least 1, got {desired_max_tokens}.", "Use 1 or more, or None.")
    margin = safety_tokens(prompt_tokens, safety_margin)
    room = max_model_len - prompt_tokens - margin
    if room < 1:
        raise PromptTooLongError(prompt_tokens, max_model_len, margin)
    return room if desired_max_tokens is None else min(desired_max_tokens, room)


def server_max_model_len(model_card) -> int | None:
    """`max_model_len` from a `/v1/models` entry (vLLM and kvtool serve list it); None when absent."""
    data = model_card if isinstance(model_card, dict) else getattr(model_card, "model_extra", None) or {}
    value = data.get("max_model_len")
    return int(value) if value else None
