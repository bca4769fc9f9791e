"""Request fields kvtool does not implement: refused by name, never silently dropped.

A field vLLM 0.33 accepts but kvtool does not implement is a 400 naming it, unless it is sent at
vLLM's own default (which changes nothing). A field vLLM does not know either is ignored, as vLLM
ignores it, and logged once per server process. The lists are vLLM 0.33's ChatCompletionRequest and
CompletionRequest fields (vllm/entrypoints/openai/{chat_completion,completion}/protocol.py).
"""

from __future__ import annotations

import json
import logging

from pydantic import BaseModel

from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

logger = logging.getLogger("kvtool.serve")

# field -> vLLM 0.33's default, for both routes
NOT_IMPLEMENTED = {
    "watermarking": None,
    "spaces_between_special_tokens": True,
    "priority": 0,
    "session_id": None,
    "return_weight_versions": False,
    "routed_experts_prompt_start": 0,
    "return_token_offsets": False,
    "mm_payload": "tensors",
    "return_mm_kwargs": None,
    "cache_salt": None,
    "ec_transfer_params": None,
    "vllm_xargs": None,
    "repetition_detection": None,
    "stream_interval": None,
    "thinking_token_budget": None,
}
NOT_IMPLEMENTED_CHAT = {
    **NOT_IMPLEMENTED,
    "reasoning_effort": None,
    "media_io_kwargs": None,
    "mm_processor_kwargs": None,
    "return_prompt_text": None,
}
NOT_IMPLEMENTED_COMPLETIONS = {**NOT_IMPLEMENTED, "suffix": None}
# vLLM 0.33's ResponsesRequest fields (vllm/entrypoints/openai/responses/protocol.py) kvtool does not implement
NOT_IMPLEMENTED_RESPONSES = {
    "truncation": "disabled",
    "watermarking": None,
    "session_id": None,
    "priority": 0,
    "mm_payload": "tensors",
    "return_mm_kwargs": None,
    "cache_salt": None,
    "media_io_kwargs": None,
    "mm_processor_kwargs": None,
    "previous_input_messages": None,
    "vllm_xargs": None,
    "kv_transfer_params": None,
    "ec_transfer_params": None,
    "spaces_between_special_tokens": True,
}
# vLLM accepts these and does nothing with them here: `user` always, `include_reasoning` without a reasoning parser
ACCEPTED_AND_IGNORED = {"user", "include_reasoning"}

_logged_unknown: set[str] = set()


def check_request_fields(body: BaseModel, not_implemented: dict) -> None:
    """400 for the first field kvtool cannot honour; log (once per name) the fields nobody knows."""
    extra = body.model_extra or {}
    for name, value in extra.items():
        if name in not_implemented and value != not_implemented[name]:
            message = messages.FIELD_NOT_SUPPORTED.format(param=name, default=json.dumps(not_implemented[name]))
            raise APIError(message, param=name)
    unknown = sorted(set(extra) - set(not_implemented) - ACCEPTED_AND_IGNORED - _logged_unknown)
    if unknown:
        _logged_unknown.update(unknown)
        logger.warning(messages.FIELDS_IGNORED_LOG.format(fields=", ".join(unknown)))
