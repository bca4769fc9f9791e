"""What a Responses API response holds: its output items (the official `openai` models, dumped to JSON), usage,
and the response object around them, field for field as vLLM 0.33 writes it
(vllm/entrypoints/openai/responses/protocol.py ResponsesResponse.from_request, utils.py build_response_output_items).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.server.responses.protocol import ResponsesRequest
from kvtool.engine.server.responses.tools import ToolNames


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"  # 16 hex digits, as vLLM's random_uuid


def dumped(model) -> dict:
    return model.model_dump(mode="json", by_alias=True)


def item_status(finish_reason: str | None) -> str:
    """An item cut by max_output_tokens is incomplete; every other finished item is completed."""
    return "incomplete" if finish_reason == "length" else "completed"


def message_item(item_id: str, text: str, logprobs: list[dict] | None, status: str) -> dict:
    part = ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=logprobs)
    content = [part] if text else []
    return dumped(ResponseOutputMessage(id=item_id, type="message", role="assistant", content=content, status=status))


def function_call_item(item_id: str, call_id: str, flat_name: str, arguments: str, status: str, names: ToolNames):
    name, namespace = names.split(flat_name)
    return dumped(
        ResponseFunctionToolCall(
            id=item_id,
            call_id=call_id,
            type="function_call",
            name=name,
            namespace=namespace,
            arguments=arguments,
            status=status,
        )
    )


def output_items(choice: dict, names: ToolNames) -> list[dict]:
    """The items of a whole reply, from its chat choice: the text as a message, then each tool call; only the last
    item can have been cut short."""
    message, last_status = choice["message"], item_status(choice["finish_reason"])
    calls = message.get("tool_calls") or []
    items = []
    if message["content"]:
        logprobs = choice["logprobs"]["content"] if choice["logprobs"] else None
        status = "completed" if calls else last_status
        items.append(message_item(new_id("msg"), message["content"], logprobs, status))
    for i, call in enumerate(calls):
        status = last_status if i == len(calls) - 1 else "completed"
        function = call["function"]
        items.append(
            function_call_item(new_id("fc"), call["id"], function["name"], function["arguments"], status, names)
        )
    return items


def usage(prompt_tokens: int, output_tokens: int, cached_tokens: int) -> dict:
    """vLLM's usage of one generation: per-turn lists stay empty (there is one turn), no reasoning tokens."""
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": cached_tokens,
            "cache_write_tokens": 0,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": 0,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": prompt_tokens + output_tokens,
    }


def raw_messages(text: str, token_ids: list[int]) -> list[dict]:
    """enable_response_messages: the prompt or the output as text and token ids (the ids are the truth)."""
    return [{"message": text, "tokens": list(token_ids), "type": "raw_message_tokens"}] if text or token_ids else []


@dataclass
class ResponseEnvelope:
    """The response object's fields that come from the request and its sampling parameters."""

    request: ResponsesRequest
    response_id: str
    model: str
    params: SamplingParams
    max_output_tokens: int
    tool_choice: str | dict
    created_at: int = field(default_factory=lambda: int(time.time()))

    def body(self, status: str, output: list[dict], usage_: dict | None = None, messages: tuple = (None, None)):
        request, params = self.request, self.params
        return {
            "id": self.response_id,
            "created_at": self.created_at,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": request.instructions,
            "metadata": request.metadata,
            "model": self.model,
            "object": "response",
            "output": output,
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "temperature": params.temperature,
            "tool_choice": self.tool_choice,
            "tools": [dumped(tool) for tool in request.tools],
            "top_p": params.top_p,
            "background": bool(request.background),
            "max_output_tokens": self.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "previous_response_id": request.previous_response_id,
            "prompt": None,
            "prompt_cache_options": _cache_options(request),
            "prompt_cache_key": request.prompt_cache_key,
            "prompt_cache_retention": request.prompt_cache_retention,
            "reasoning": dumped(request.reasoning) if request.reasoning else None,
            "safety_identifier": request.safety_identifier,
            "service_tier": request.service_tier,
            "status": status,
            "text": dumped(request.text) if request.text else None,
            "top_logprobs": params.logprobs,
            "truncation": "disabled",
            "usage": usage_,
            "user": request.user,
            "presence_penalty": params.presence_penalty,
            "frequency_penalty": params.frequency_penalty,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "input_messages": messages[0],
            "output_messages": messages[1],
        }


def _cache_options(request: ResponsesRequest) -> dict | None:
    options = request.prompt_cache_options
    return options.model_dump(exclude={"prewarm"}) if options else None  # prewarm is the request's only
