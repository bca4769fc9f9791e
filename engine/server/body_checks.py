"""vLLM 0.33's checks of a raw request body, run before pydantic reads a single field (its `mode="before"` model
validators in entrypoints/openai/{completion,chat_completion}/protocol.py), and of chat content parts as they
are read.

Each failure is a 400 of its own (vLLM's VLLMValidationError: BadRequestError, the parameter it names), never a
"validation error", and it comes first whatever else the body gets wrong: an APIError passes through pydantic
untouched (it is no ValueError).
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from kvtool.engine.server.defaults import MAX_COMPLETION_PROMPTS
from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

CONSTRAINT_KINDS = ("json", "regex", "choice")  # the structured_outputs kinds vLLM counts here
FREE_CHOICES = ("none", "auto", "required")  # tool_choice values other than a named function
# Chat content part types (vllm/renderers/chat_utils/chat_message.py): the text kinds and the key of their text.
PROMPT_EMBEDS_PLACEHOLDER = "<prompt_embeds>"  # vLLM's placeholder token for an embeddings part
TEXT_PART_KEYS = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
    "thinking": "thinking",
}
MEDIA_PART_TYPES = frozenset(
    {"image_url", "input_image", "image_pil", "image_embeds", "audio_url", "input_audio", "audio_embeds"}
    | {"video_url", "video_embeds"}
)
SUPPORTED_PART_TYPES = ", ".join(sorted({*TEXT_PART_KEYS, "prompt_embeds"}))


def refuse(message: str, param: str | None = None, value: Any = None) -> NoReturn:
    raise APIError(messages.with_parameter(message, param, value), param=param)


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
    """/v1/completions: a prompt or embeddings to run (at most VLLM_MAX_COMPLETION_PROMPTS of them), and no
    echoed logprobs with beam search."""
    if not isinstance(data, dict):
        return data
    embeds = data.get("prompt_embeds")
    if data.get("prompt") in (None, "") and embeds in (None, []):
        refuse(messages.PROMPT_OR_EMBEDS_MISSING, "prompt")
    name, default = MAX_COMPLETION_PROMPTS
    limit = int(os.environ.get(name, default))
    if isinstance(embeds, list) and len(embeds) > limit:
        refuse(messages.PROMPT_EMBEDS_TOO_MANY.format(count=len(embeds), limit=limit), "prompt_embeds")
    if data.get("use_beam_search") and data.get("echo") and data.get("logprobs") is not None:
        refuse(messages.ECHO_LOGPROBS_WITH_BEAM_SEARCH, "echo")
    if data.get("prompt") == "" and embeds:
        return {**data, "prompt": None}  # the embeddings are the prompt
    return data


def chat_body(cls, data: Any) -> Any:
    """/v1/chat/completions: a named tool forces its own schema, so not beside a json, regex or choice constraint."""
    if isinstance(data, dict) and constraint_kinds(data) and data.get("tool_choice", "none") not in FREE_CHOICES:
        refuse(messages.CONSTRAINTS_AND_NAMED_TOOL)
    return data


def batch_body(cls, data: Any) -> Any:
    """/v1/chat/completions/batch's refusals, in vLLM's order, then kvtool's (streaming, tools)."""
    if not isinstance(data, dict):
        return data
    transfer = data.get("kv_transfer_params")
    n = data.get("n", 1)
    if data.get("use_beam_search"):
        refuse(messages.BATCH_BEAM_SEARCH, "use_beam_search")
    if data.get("logprob_token_ids") and not data.get("logprobs"):
        refuse(messages.LOGPROB_TOKEN_IDS_WITHOUT_LOGPROBS_CHAT, "logprob_token_ids")
    if isinstance(transfer, dict) and transfer.get("prompt_token_ids") is not None:
        refuse(messages.BATCH_PROMPT_TOKEN_IDS, "kv_transfer_params.prompt_token_ids")
    if n is not None and n != 1:
        refuse(messages.BATCH_N, "n", n)
    if data.get("stream") is True:
        refuse(messages.BATCH_STREAM, "stream")
    if data.get("tools"):
        refuse(messages.BATCH_TOOLS, "tools")
    return data


def check_content_part(part_type: str | None, data: str | None) -> None:
    """A part kvtool reads: a text kind, or prompt_embeds with its data; a media part needs a multimodal model."""
    if part_type is None:
        refuse(messages.CONTENT_PART_MISSING_TYPE, "type")
    if part_type == "prompt_embeds" and not data:
        refuse(messages.PROMPT_EMBEDS_PART_WITHOUT_DATA, "prompt_embeds")
    if part_type in MEDIA_PART_TYPES:
        refuse(messages.CONTENT_PART_NEEDS_MULTIMODAL.format(part_type=part_type), "type", part_type)
    if part_type not in TEXT_PART_KEYS and part_type != "prompt_embeds":
        message = messages.CONTENT_PART_UNSUPPORTED.format(part_type=part_type, supported=SUPPORTED_PART_TYPES)
        refuse(message, "type", part_type)
