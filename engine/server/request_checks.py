"""vLLM 0.33's refusals that run while a request body is read, for the models in protocol.py.

Each raises an APIError, which passes through pydantic untouched (it is no ValueError), as vLLM's
VLLMValidationError does: the client gets vLLM's sentence, its " (parameter=...)" suffix and `param`.
"""

from __future__ import annotations

import os
from typing import Any

from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.defaults import MAX_COMPLETION_PROMPTS

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


def refuse(message: str, param: str, value: Any = None) -> APIError:
    return APIError(msg.with_parameter(message, param, value), param=param)


def check_content_part(part_type: str | None, data: str | None) -> None:
    """A part kvtool reads: a text kind, or prompt_embeds with its data; a media part needs a multimodal model."""
    if part_type is None:
        raise refuse(msg.CONTENT_PART_MISSING_TYPE, "type")
    if part_type == "prompt_embeds" and not data:
        raise refuse(msg.PROMPT_EMBEDS_PART_WITHOUT_DATA, "prompt_embeds")
    if part_type in MEDIA_PART_TYPES:
        raise refuse(msg.CONTENT_PART_NEEDS_MULTIMODAL.format(part_type=part_type), "type", part_type)
    if part_type not in TEXT_PART_KEYS and part_type != "prompt_embeds":
        message = msg.CONTENT_PART_UNSUPPORTED.format(part_type=part_type, supported=SUPPORTED_PART_TYPES)
        raise refuse(message, "type", part_type)


def prompt_or_embeds(data: Any) -> Any:
    """A completions body needs a prompt or embeddings, and at most VLLM_MAX_COMPLETION_PROMPTS embeddings."""
    if not isinstance(data, dict):
        return data
    embeds = data.get("prompt_embeds")
    if data.get("prompt") in (None, "") and embeds in (None, []):
        raise refuse(msg.PROMPT_OR_EMBEDS_REQUIRED, "prompt")
    name, default = MAX_COMPLETION_PROMPTS
    limit = int(os.environ.get(name, default))
    if isinstance(embeds, list) and len(embeds) > limit:
        raise refuse(msg.PROMPT_EMBEDS_TOO_MANY.format(count=len(embeds), limit=limit), "prompt_embeds")
    if data.get("prompt") == "" and embeds:
        return {**data, "prompt": None}  # the embeddings are the prompt
    return data


def batch_mode(data: Any) -> Any:
    """/v1/chat/completions/batch's refusals, in vLLM's order, then kvtool's (streaming, tools)."""
    if not isinstance(data, dict):
        return data
    transfer = data.get("kv_transfer_params")
    n = data.get("n", 1)
    if data.get("use_beam_search"):
        raise refuse(msg.BATCH_BEAM_SEARCH, "use_beam_search")
    if data.get("logprob_token_ids") and not data.get("logprobs"):
        raise refuse(msg.BATCH_LOGPROB_TOKEN_IDS, "logprob_token_ids")
    if isinstance(transfer, dict) and transfer.get("prompt_token_ids") is not None:
        raise refuse(msg.BATCH_PROMPT_TOKEN_IDS, "kv_transfer_params.prompt_token_ids")
    if n is not None and n != 1:
        raise refuse(msg.BATCH_N, "n", n)
    if data.get("stream") is True:
        raise refuse(msg.BATCH_STREAM, "stream")
    if data.get("tools"):
        raise refuse(msg.BATCH_TOOLS, "tools")
    return data
