"""A Responses request's tools and tool_choice as the chat pipeline takes them, and tool calls back to Responses names.

Function tools go to the chat template as chat tools; a namespace's functions are flattened to
`<namespace>__<name>`, and a call of a flattened name comes back with its name and namespace apart (vLLM 0.33,
vllm/tool_parsers/utils.py). Built-in and custom tools ask for what the embedded engine cannot run: refused.
tool_choice is checked as vLLM's ResponsesRequest.check_tool_usage checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvtool.engine.server.chat.protocol import NamedToolChoice, Tool
from kvtool.engine.server.errors import APIError
from kvtool.engine.sizing import messages

NAMESPACE_SEPARATOR = "__"


@dataclass
class ToolNames:
    """The chat tools of a request, and for each flattened name the (name, namespace) it stands for."""

    tools: list[Tool] = field(default_factory=list)
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)

    def split(self, flat_name: str) -> tuple[str, str | None]:
        return self.namespaced.get(flat_name, (flat_name, None))

    def resolve(self, name: str) -> str:
        """A named tool_choice's flattened name: itself, or the one namespace function of that local name."""
        if any(tool.function.name == name for tool in self.tools):
            return name
        candidates = [flat for flat, (local, _) in self.namespaced.items() if local == name]
        if len(candidates) > 1:
            raise APIError(
                messages.NAMED_TOOL_AMBIGUOUS.format(name=name, candidates=", ".join(candidates)), param="tool_choice"
            )
        if not candidates:
            raise APIError(messages.NAMED_TOOL_NOT_FOUND, param="tool_choice")
        return candidates[0]

    def add(self, function, namespace: str | None = None) -> None:
        name = f"{namespace}{NAMESPACE_SEPARATOR}{function.name}" if namespace else function.name
        if function.parameters is not None and not isinstance(function.parameters, dict):  # a namespace's may be
            got = type(function.parameters).__name__
            raise APIError(messages.TOOL_PARAMETERS_NOT_OBJECT.format(name=name, got=got), param="tools")
        if namespace:
            self.namespaced[name] = (function.name, namespace)
        definition = {"name": name, "description": function.description, "parameters": function.parameters}
        definition["strict"] = function.strict
        self.tools.append(Tool.model_validate({"type": "function", "function": definition}))


def tool_names(tools: list) -> ToolNames:
    names = ToolNames()
    for tool in tools:
        if tool.type == "function":
            names.add(tool)
        elif tool.type == "namespace" and all(inner.type == "function" for inner in tool.tools):
            for inner in tool.tools:
                names.add(inner, tool.name)
        else:
            kind = "custom (in a namespace)" if tool.type == "namespace" else tool.type
            raise APIError(messages.TOOL_TYPE_NOT_SUPPORTED.format(type=kind), param="tools")
    return names


def chat_tool_choice(tool_choice, names: ToolNames) -> str | NamedToolChoice:
    """The chat tool_choice: "none" without tools (unless the request forces a call), a named function by its
    flattened name."""
    named = not isinstance(tool_choice, str)
    if not names.tools:
        if tool_choice == "required":
            raise APIError(messages.REQUIRED_WITHOUT_TOOLS, param="tool_choice")
        if named and tool_choice.type == "function":
            raise APIError(messages.NAMED_TOOL_NOT_FOUND, param="tool_choice")
        if not named:
            return "none"
    if not named:
        return tool_choice
    if tool_choice.type != "function":
        raise APIError(messages.TOOL_CHOICE_NOT_SUPPORTED.format(type=tool_choice.type), param="tool_choice")
    return NamedToolChoice.model_validate({"type": "function", "function": {"name": names.resolve(tool_choice.name)}})


def echoed_tool_choice(choice: str | NamedToolChoice) -> str | dict:
    """tool_choice as the response states it (Responses' flat shape for a named function)."""
    return choice if isinstance(choice, str) else {"type": "function", "name": choice.function.name}
