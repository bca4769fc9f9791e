"""Tool calls in model text, for tool_choice "auto": vLLM's `hermes` and `llama3_json` formats.

hermes (Qwen, SmolLM, Hermes chat templates): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
any number of them, after optional content. llama3_json (Llama 3.1+ templates): the whole reply is
`{"name": ..., "parameters": {...}}` (or several joined by ";"), optionally after `<|python_tag|>`.
Both as vLLM 0.33 parses them (vllm/tool_parsers/hermes_tool_parser.py, llama_tool_parser.py).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text
    id: str = field(default_factory=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}")

    def as_dict(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ExtractedToolCalls:
    content: str | None
    tool_calls: list[ToolCall]


class HermesToolParser:
    start, end = "<tool_call>", "</tool_call>"
    pattern = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)

    def extract(self, text: str) -> ExtractedToolCalls:
        if self.start not in text:
            return ExtractedToolCalls(text, [])
        try:
            calls = [json.loads(closed or open_) for closed, open_ in self.pattern.findall(text)]
            tool_calls = [ToolCall(c["name"], json.dumps(c.get("arguments", {}), ensure_ascii=False)) for c in calls]
        except (ValueError, KeyError, TypeError):
            return ExtractedToolCalls(text, [])
        content = text[: text.find(self.start)]
        return ExtractedToolCalls(content or None, tool_calls)

    def sendable_content(self, text: str) -> int:
        """How much of the text so far is plain content, holding back what may become `<tool_call>`."""
        if self.start in text:
            return text.index(self.start)
        return len(text) - partial_tag_overlap(text, self.start)


class Llama3JsonToolParser:
    start = "<|python_tag|>"

    def extract(self, text: str) -> ExtractedToolCalls:
        body = text.strip().removeprefix(self.start).strip()
        if not body.startswith("{"):
            return ExtractedToolCalls(text, [])
        try:
            calls = [json.loads(part) for part in _split_calls(body)]
            tool_calls = [
                ToolCall(c["name"], json.dumps(c.get("parameters", c.get("arguments", {})), ensure_ascii=False))
                for c in calls
            ]
        except (ValueError, KeyError, TypeError):
            return ExtractedToolCalls(text, [])
        return ExtractedToolCalls(None, tool_calls)

    def sendable_content(self, text: str) -> int:
        stripped = text.lstrip()
        if not stripped or stripped.startswith(("{", self.start)) or self.start.startswith(stripped):
            return 0
        return len(text)


def _split_calls(body: str) -> list[str]:
    """JSON objects one after another, separated by ";" (and whitespace)."""
    decoder, parts, at = json.JSONDecoder(), [], 0
    while at < len(body):
        _, end = decoder.raw_decode(body, at)
        parts.append(body[at:end])
        at = end
        while at < len(body) and body[at] in "; \n\t":
            at += 1
    return parts


def partial_tag_overlap(text: str, tag: str) -> int:
    """The length of the longest end of `text` that is a proper start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


TOOL_PARSERS = {"hermes": HermesToolParser, "llama3_json": Llama3JsonToolParser}
