"""Streaming a chat reply whose tool calls are being read: the delta objects vLLM sends.

A named call streams its arguments as they are generated (the first delta names the function); for
"required" and "auto" each call goes out whole once the reply is complete, after any plain content
(for "auto", content is sent as it comes, holding back what may turn out to be a tool-call tag).
"""

from __future__ import annotations

from kvtool.engine.server.chat.tool_parsers import ExtractedToolCalls, ToolCall
from kvtool.engine.server.chat.tools import ToolPlan


class ToolCallStream:
    def __init__(self, plan: ToolPlan, parallel_tool_calls: bool | None):
        self.plan, self.parallel = plan, parallel_tool_calls
        self.text, self.sent = "", 0
        self.named_call: ToolCall | None = None
        self.extracted = ExtractedToolCalls(None, [])

    def deltas(self, delta_text: str, finish_reason: str | None) -> list[dict]:
        self.text += delta_text
        if self.plan.mode == "named":
            return self._named(delta_text, finish_reason)
        out = []
        if self.plan.mode == "auto" and finish_reason is None:
            out += self._content(self.plan.parser.sendable_content(self.text))
        if finish_reason is not None:
            self.extracted = self.plan.extract(self.text)
            calls = self.extracted.tool_calls if self.parallel is not False else self.extracted.tool_calls[:1]
            end = len(self.extracted.content or "") if calls else len(self.text)
            out += self._content(end if self.plan.mode == "auto" else 0)
            out += [{"tool_calls": [{"index": i, **call.as_dict()}]} for i, call in enumerate(calls)]
        return out

    def _content(self, end: int) -> list[dict]:
        if end <= self.sent:
            return []
        content, self.sent = self.text[self.sent : end], end
        return [{"content": content}]

    def _named(self, delta_text: str, finish_reason: str | None) -> list[dict]:
        if finish_reason is not None:
            self.extracted = self.plan.extract(self.text, finish_reason)
        if not delta_text:
            return []
        if self.named_call is None:
            self.named_call = ToolCall(self.plan.named, "")
            call = self.named_call.as_dict()
            call["function"]["arguments"] = delta_text
            return [{"tool_calls": [{"index": 0, **call}]}]
        return [{"tool_calls": [{"index": 0, "function": {"arguments": delta_text}}]}]
