"""vLLM 0.33's checks of a raw request body, run before pydantic reads a single field (its `mode="before"` model
validators in entrypoints/openai/{completion,chat_completion}/protocol.py).

Each failure is a 400 of its own (vLLM's VLLMValidationError: BadRequestError, the parameter it names), never a
"validation error", and it comes first whatever else the body gets wrong.
"""

from __future__ import annotations

from typing import Any

from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

CONSTRAINT_KINDS = ("json", "regex", "choice")  # the structured_outputs kinds vLLM counts here
FREE_CHOICES = ("none", "auto", "required")  # tool_choice values other than a named function


def refuse(message: str, param: str | None = None) -> None:
    raise APIError(messages.with_parameter(message, param), param=param)


def constraint_kinds(data: dict) -> int:
    structured = data.get("structured_outputs")
    return sum(structured.get(kind) is not None for kind in CONSTRAINT_KINDS) if isinstance(structured, dict) else 0


def sampling_body(cls, data: Any) -> Any:
    """Both routes: stream_options without stream, two constraint kinds (named by `cls.constraint_param`)."""
    if not isinstance(data, dict):
        return data
    if data.get("stream_options") and not data.get("stream"):
        refuse(messages.STREAM_OPTIONS_WITHOUT_STREAM, "stream_options")
    if constraint_kinds(data) > 1:
        refuse(messages.STRUCTURED_OUTPUTS_KINDS, cls.constraint_param)
    if data.get("logprob_token_ids") and data.get("use_beam_search"):
        refuse(messages.LOGPROB_TOKEN_IDS_WITH_BEAM_SEARCH, "logprob_token_ids")
    return data


def completion_body(cls, data: Any) -> Any:
    """/v1/completions: a prompt to run, and no echoed logprobs with beam search."""
    if not isinstance(data, dict):
        return data
    if data.get("prompt") in (None, "") and data.get("prompt_embeds") in (None, []):
        refuse(messages.PROMPT_OR_EMBEDS_MISSING, "prompt")
    if data.get("use_beam_search") and data.get("echo") and data.get("logprobs") is not None:
        refuse(messages.ECHO_LOGPROBS_WITH_BEAM_SEARCH, "echo")
    return data


def chat_body(cls, data: Any) -> Any:
    """/v1/chat/completions: a named tool forces its own schema, so not beside a json, regex or choice constraint."""
    if isinstance(data, dict) and constraint_kinds(data) and data.get("tool_choice", "none") not in FREE_CHOICES:
        refuse(messages.CONSTRAINTS_AND_NAMED_TOOL)
    return data
