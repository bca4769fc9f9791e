"""From a Responses request to the chat request kvtool's chat pipeline runs.

The conversation is built as vLLM 0.33 builds it (vllm/entrypoints/openai/responses/utils.py
construct_input_messages): the instructions as a system message, the stored conversation of
previous_response_id (its instructions left out) and that response's output, then the input items. A function
call, a reasoning item or assistant text right after an assistant message joins that message.
"""

from __future__ import annotations

from openai.types.responses import ResponseFunctionToolCall, ResponseReasoningItem
from pydantic import ValidationError

from kvtool.engine.server.chat.protocol import ChatCompletionRequest, ChatMessage
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.protocol import SAMPLING_KNOBS, ResponseFormat
from kvtool.engine.server.responses.protocol import ResponsesRequest
from kvtool.engine.server.responses.tools import ToolNames, chat_tool_choice
from kvtool.engine.sizing import messages
from kvtool.engine.sizing.request_length import RESPONSES_FIELD, MaxTokensField

TEXT_PARTS = ("input_text", "output_text", "text")
MESSAGE_ROLES = ("user", "assistant", "system", "developer")
UNFINISHED = ("in_progress", "incomplete")


class ResponsesChatRequest(ChatCompletionRequest):
    """The chat request a Responses request runs as: its max_completion_tokens is max_output_tokens, as sent."""

    def max_tokens_field(self) -> MaxTokensField:
        value = self.max_completion_tokens
        return MaxTokensField(value, RESPONSES_FIELD, sent=value is not None)


def conversation(request: ResponsesRequest, history: list[dict]) -> list[dict]:
    """Chat messages (as the chat template takes them) for the request, after `history` (previous turns)."""
    chat = [{"role": "system", "content": request.instructions}] if request.instructions else []
    chat += [dict(message) for message in history if message["role"] != "system"]
    items = [{"role": "user", "content": request.input}] if isinstance(request.input, str) else request.input
    for index, item in enumerate(items):
        add_item(chat, item, index)
    return chat


def previous_turns(store, response_id: str | None) -> list[dict]:
    """The conversation a stored response answered, and its output (reasoning left out, as vLLM leaves it)."""
    if response_id is None:
        return []
    output = store.get(response_id)["output"]
    history = [dict(message) for message in store.conversations.get(response_id, [])]
    for index, item in enumerate(output):
        if item["type"] != "reasoning":
            add_item(history, item, index)
    return history


def add_item(chat: list[dict], item: dict, index: int) -> None:
    """Append the message an input (or earlier output) item makes, or join it to the assistant message before."""
    kind = item.get("type") or ("message" if "role" in item else None)
    reader = _READERS.get(kind)
    if reader is None:
        raise APIError(messages.INPUT_ITEM_UNSUPPORTED.format(type=kind), param="input")
    message = reader(item, index)
    if message is not None and not _joined(chat, message):
        chat.append(message)


def _joined(chat: list[dict], message: dict) -> bool:
    previous = chat[-1] if chat else None
    if message["role"] != "assistant" or previous is None or previous["role"] != "assistant":
        return False
    if "tool_calls" in message:
        previous["tool_calls"] = [*(previous.get("tool_calls") or []), *message["tool_calls"]]
        return True
    key = "reasoning" if "reasoning" in message else "content"
    if previous.get(key) is None:
        previous[key] = message[key]
        return True
    return False


def _message(item: dict, index: int) -> dict:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise _invalid(item, index, f"role must be one of {', '.join(MESSAGE_ROLES)}, got {role!r}")
    return {"role": role, "content": _text(item.get("content"), item, index)}


def _function_call(item: dict, index: int) -> dict:
    call = _validated(ResponseFunctionToolCall, item, index)
    name = f"{call.namespace}__{call.name}" if call.namespace else call.name
    function = {"name": name, "arguments": call.arguments}
    return {"role": "assistant", "tool_calls": [{"id": call.call_id, "type": "function", "function": function}]}


def _function_call_output(item: dict, index: int) -> dict:
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        raise _invalid(item, index, "call_id must be a string")
    return {"role": "tool", "content": _text(item.get("output"), item, index), "tool_call_id": call_id}


def _reasoning(item: dict, index: int) -> dict:
    reasoning = _validated(ResponseReasoningItem, {"id": f"rs_{index}", **item}, index)
    if reasoning.encrypted_content:
        raise APIError(messages.ENCRYPTED_REASONING, param="input")
    texts = reasoning.content or reasoning.summary
    return {"role": "assistant", "reasoning": texts[0].text if texts else ""}


_READERS = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
    "reasoning": _reasoning,
}


def _text(content, item: dict, index: int) -> str:
    """A message's text: a string, or its text parts joined by newlines (as vLLM joins them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(item, index, "content must be a string or a list of content parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS:
            raise APIError(messages.INPUT_PART_NOT_TEXT.format(index=index, type=kind), param="input")
        if not isinstance(part.get("text"), str):
            raise _invalid(item, index, f"a {kind} part needs a string text")
        texts.append(part["text"])
    return "\n".join(texts)


def _validated(model, item: dict, index: int):
    try:
        return model.model_validate(item)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise _invalid(item, index, f"{where}: {first['msg']}" if where else first["msg"]) from None


def _invalid(item: dict, index: int, problem: str) -> APIError:
    kind = item.get("type") or "message"
    return APIError(messages.INPUT_ITEM_INVALID.format(index=index, type=kind, problem=problem), param="input")


SAMPLING_FIELDS = {
    *SAMPLING_KNOBS,
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "logit_bias",
    "include_stop_str_in_output",
    "user",
    "structured_outputs",
}


def continues_final_message(request: ResponsesRequest) -> bool:
    """An unfinished assistant message (or reasoning) at the end of the input is continued, not answered."""
    if isinstance(request.input, str) or not request.input:
        return False
    last = request.input[-1]
    return last.get("type", "message") in ("message", "reasoning") and last.get("status") in UNFINISHED


def chat_request(request: ResponsesRequest, chat: list[dict], names: ToolNames) -> ResponsesChatRequest:
    """The chat request to run. Built without validation: every value was checked as part of the Responses request,
    and the engine checks the sampling values in vLLM's words, as vLLM does for this API."""
    continued = continues_final_message(request)
    return ResponsesChatRequest.model_construct(
        messages=[ChatMessage.model_validate(message) for message in chat],
        max_completion_tokens=request.max_output_tokens,
        logprobs=request.output_logprobs(),
        top_logprobs=request.num_top_logprobs(),
        add_generation_prompt=not continued,
        continue_final_message=continued,
        chat_template_kwargs=template_kwargs(request),
        tools=names.tools or None,
        tool_choice=chat_tool_choice(request.tool_choice, names),
        parallel_tool_calls=request.parallel_tool_calls,
        response_format=response_format(request),
        skip_special_tokens=request.skip_special_tokens is not False,
        stream=bool(request.stream),
        **{name: getattr(request, name) for name in SAMPLING_FIELDS if getattr(request, name) is not None},
    )


def template_kwargs(request: ResponsesRequest) -> dict:
    """The request's chat_template_kwargs, with reasoning.effort as the template's reasoning_effort (and
    enable_thinking, unless the request sets it), as vLLM passes them."""
    kwargs = dict(request.chat_template_kwargs or {})
    effort = request.reasoning.effort if request.reasoning else None
    if effort is not None:
        kwargs.setdefault("enable_thinking", effort != "none")
        kwargs["reasoning_effort"] = effort
    return kwargs


def response_format(request: ResponsesRequest) -> ResponseFormat | None:
    """text.format as chat's response_format; it cannot come with structured_outputs."""
    form = request.text.format if request.text else None
    if form is None:
        return None
    if request.structured_outputs is not None:
        raise APIError(messages.STRUCTURED_OUTPUTS_AND_TEXT_FORMAT, param="structured_outputs")
    if form.type != "json_schema":
        return ResponseFormat.model_validate({"type": form.type})
    schema = form.model_dump(by_alias=True, include={"name", "description", "schema_", "strict"})
    return ResponseFormat.model_validate({"type": "json_schema", "json_schema": schema})
