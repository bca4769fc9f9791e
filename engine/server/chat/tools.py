"""`tools` and `tool_choice` on /v1/chat/completions, as vLLM 0.33 handles them.

none: tools go to the chat template, the reply is plain content. auto: the server's tool parser reads
tool calls out of the text. required / a named function: the grammar forces a call (a JSON array of
{"name", "parameters"} objects, or the named function's arguments), so the arguments always parse
and match the schema (vllm/tool_parsers/utils.py get_json_schema_from_tools).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kvtool.engine.server.chat.protocol import ChatCompletionRequest, NamedToolChoice
from kvtool.engine.server.chat.tool_parsers import TOOL_PARSERS, ExtractedToolCalls, ToolCall
from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

EMPTY_PARAMETERS = {"type": "object", "properties": {}}  # a tool without parameters still takes a JSON object


@dataclass
class ToolPlan:
    mode: str  # "none" | "auto" | "required" | "named"
    tools: list[dict]  # as the chat template receives them
    named: str | None = None
    parser: object | None = None

    def schema(self, body: ChatCompletionRequest) -> dict | None:
        """The JSON schema a forced call must match; None when the model chooses."""
        by_name = {tool.function.name: tool.function.parameters for tool in body.tools or []}
        if self.mode == "named":
            return by_name[self.named] or EMPTY_PARAMETERS
        if self.mode != "required":
            return None
        items = [
            {
                "properties": {"name": {"type": "string", "enum": [name]}, "parameters": _without_defs(params)},
                "required": ["name", "parameters"],
            }
            for name, params in by_name.items()
        ]
        schema = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": items}}
        if body.parallel_tool_calls is False:
            schema["maxItems"] = 1
        return schema | ({"$defs": defs} if (defs := hoisted_defs(by_name)) else {})

    def extract(self, text: str, finish_reason: str | None = None) -> ExtractedToolCalls:
        """The calls in a reply; a forced call cut off by max_tokens is dropped (as OpenAI), and so is an empty one."""
        if self.mode == "named":
            cut = finish_reason == "length" and not _is_json(text)
            return ExtractedToolCalls("", [] if cut or not text.strip() else [ToolCall(self.named, text)])
        if self.mode == "required":
            try:
                calls = [ToolCall(c["name"], json.dumps(c["parameters"], ensure_ascii=False)) for c in json.loads(text)]
            except (ValueError, KeyError, TypeError):
                return ExtractedToolCalls("", [])
            return ExtractedToolCalls(None, calls)
        if self.mode == "auto":
            return self.parser.extract(text)
        return ExtractedToolCalls(text, [])


def tool_plan(body: ChatCompletionRequest, tool_call_parser: str | None) -> ToolPlan:
    """Validate tools / tool_choice with vLLM's messages and say how this request's reply is read."""
    if body.tools == []:
        raise APIError(messages.TOOLS_EMPTY, param="tools")
    choice = body.tool_choice if body.tool_choice is not None else ("auto" if body.tools else "none")
    tools = [tool.model_dump(exclude_none=True) for tool in body.tools or []]
    if choice == "none":
        return ToolPlan("none", tools)
    if not body.tools:
        raise APIError(messages.TOOL_CHOICE_WITHOUT_TOOLS, param="tool_choice")
    if isinstance(choice, NamedToolChoice):
        if choice.function.name not in {tool.function.name for tool in body.tools}:
            raise APIError(messages.TOOL_NOT_PASSED.format(name=choice.function.name), param="tool_choice")
        return ToolPlan("named", tools, choice.function.name)
    if choice == "auto":
        if tool_call_parser is None:
            raise APIError(messages.AUTO_TOOL_CHOICE_NEEDS_PARSER, param="tool_choice")
        return ToolPlan("auto", tools, parser=TOOL_PARSERS[tool_call_parser]())
    return ToolPlan("required", tools)


def hoisted_defs(parameters_by_name: dict[str, dict | None]) -> dict:
    """Every tool's `$defs`, gathered at the top of the "required" schema, where `#/$defs/...` refs resolve (vLLM)."""
    hoisted: dict = {}
    for name, params in parameters_by_name.items():
        defs = (params or {}).get("$defs", {})
        if not isinstance(defs, dict):
            raise APIError(
                messages.with_parameter(
                    messages.TOOL_DEFS_NOT_OBJECT.format(name=name, kind=type(defs).__name__), "tools"
                ),
                param="tools",
            )
        for def_name, definition in defs.items():
            if hoisted.setdefault(def_name, definition) != definition:
                message = messages.TOOL_DEFS_CONFLICT.format(name=def_name)
                raise APIError(messages.with_parameter(message, "tools"), param="tools")
    return hoisted


def _without_defs(params: dict | None) -> dict:
    if not params:
        return EMPTY_PARAMETERS
    return {key: value for key, value in params.items() if key != "$defs"}


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def finish_reason(plan: ToolPlan, extracted: ExtractedToolCalls, engine_reason: str | None) -> str | None:
    """ "tool_calls" when the model called tools and stopped by itself (a forced named call keeps "stop")."""
    if extracted.tool_calls and engine_reason == "stop" and plan.mode in ("auto", "required"):
        return "tool_calls"
    return engine_reason
