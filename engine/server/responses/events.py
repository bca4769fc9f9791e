"""The server-sent events of a streamed response, as vLLM 0.33's SimpleStreamingEventProcessor sends them
(vllm/entrypoints/openai/responses/streaming_events.py).

The reply arrives as chat deltas (content, or tool-call pieces as chat/tool_stream.py reads them). Each run of one
kind is an output item: added, its deltas, then done; a tool call with another index starts a new item. Every
event is the official `openai` model of its type, numbered in sending order.
"""

from __future__ import annotations

import json

from openai.types.responses import (
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from kvtool.engine.server.responses.output import dumped, function_call_item, message_item, new_id
from kvtool.engine.server.responses.tools import ToolNames


def sse_event(event: dict) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"


def _type_of(event_class) -> str:
    return event_class.model_fields["type"].annotation.__args__[0]


def stream_logprobs(logprobs: list[dict]) -> list[dict]:
    """A delta event's logprobs: token and logprob, without bytes (vLLM's _to_stream_logprobs)."""
    return [
        {
            "token": lp["token"],
            "logprob": lp["logprob"],
            "top_logprobs": [{"token": t["token"], "logprob": t["logprob"]} for t in lp["top_logprobs"]],
        }
        for lp in logprobs
    ]


class ResponseEvents:
    def __init__(self, names: ToolNames):
        self.names = names
        self.sequence_number = 0
        self.items: list[dict] = []  # the output items closed so far, as output_item.done sent them
        self.kind: str | None = None  # the open item's: "message" or "function_call"
        self.item_id, self.text, self.logprobs = "", "", []
        self.call: dict = {}  # the open function call: index, call_id, name

    def emit(self, event_class, **fields) -> str:
        event = event_class(type=_type_of(event_class), sequence_number=self.sequence_number, **fields)
        self.sequence_number += 1
        return sse_event(dumped(event))

    def envelope(self, kind: str, response: dict) -> str:
        """response.created, .in_progress, .completed or .incomplete: the response object as it stands."""
        event = {"response": response, "sequence_number": self.sequence_number, "type": kind}
        self.sequence_number += 1
        return sse_event(event)

    def delta(self, delta: dict, logprobs: list[dict]) -> list[str]:
        """Events for one chat delta: {"content": text} or {"tool_calls": [one call's piece]}."""
        if delta.get("content"):
            return self._content(delta["content"], logprobs)
        return [event for call in delta.get("tool_calls") or [] for event in self._tool_call(call)]

    def _content(self, text: str, logprobs: list[dict]) -> list[str]:
        events = [] if self.kind == "message" else self.close() + self._open_message()
        self.text += text
        self.logprobs += logprobs
        fields = dict(item_id=self.item_id, output_index=len(self.items), content_index=0)
        return events + [self.emit(ResponseTextDeltaEvent, delta=text, logprobs=stream_logprobs(logprobs), **fields)]

    def _open_message(self) -> list[str]:
        self.kind, self.item_id, self.text, self.logprobs = "message", new_id("msg"), "", []
        item = ResponseOutputMessage(
            id=self.item_id, type="message", role="assistant", content=[], status="in_progress"
        )
        part = ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
        return [
            self.emit(ResponseOutputItemAddedEvent, output_index=len(self.items), item=item),
            self.emit(
                ResponseContentPartAddedEvent,
                item_id=self.item_id,
                output_index=len(self.items),
                content_index=0,
                part=part,
            ),
        ]

    def _tool_call(self, call: dict) -> list[str]:
        function = call.get("function") or {}
        starts = self.kind != "function_call" or call.get("index") != self.call.get("index")
        events = self.close() + self._open_call(call) if starts else []
        arguments = function.get("arguments") or ""
        if not arguments:
            return events
        self.text += arguments
        delta = dict(item_id=self.item_id, output_index=len(self.items), delta=arguments)
        return events + [self.emit(ResponseFunctionCallArgumentsDeltaEvent, **delta)]

    def _open_call(self, call: dict) -> list[str]:
        self.kind, self.item_id, self.text = "function_call", new_id("fc"), ""
        self.call = {"index": call.get("index"), "call_id": call.get("id"), "name": call["function"]["name"]}
        name, namespace = self.names.split(self.call["name"])
        item = ResponseFunctionToolCall(
            id=self.item_id,
            call_id=self.call["call_id"],
            type="function_call",
            name=name,
            namespace=namespace,
            arguments="",
            status="in_progress",
        )
        return [self.emit(ResponseOutputItemAddedEvent, output_index=len(self.items), item=item)]

    def close(self, status: str = "completed") -> list[str]:
        """The done events of the open item, if any; the item joins `items`."""
        if self.kind is None:
            return []
        events = self._close_message(status) if self.kind == "message" else self._close_call(status)
        self.kind = None
        return events

    def _close_message(self, status: str) -> list[str]:
        logprobs = self.logprobs or None
        item = message_item(self.item_id, self.text, logprobs, status)
        part = ResponseOutputText(type="output_text", text=self.text, annotations=[], logprobs=logprobs)
        where = dict(item_id=self.item_id, output_index=len(self.items), content_index=0)
        return [
            self.emit(ResponseTextDoneEvent, text=self.text, logprobs=[], **where),
            self.emit(ResponseContentPartDoneEvent, part=part, **where),
            *self._item_done(item),
        ]

    def _close_call(self, status: str) -> list[str]:
        call = self.call
        item = function_call_item(self.item_id, call["call_id"], call["name"], self.text, status, self.names)
        done = dict(item_id=self.item_id, output_index=len(self.items), arguments=self.text, name=item["name"])
        return [self.emit(ResponseFunctionCallArgumentsDoneEvent, **done), *self._item_done(item)]

    def _item_done(self, item: dict) -> list[str]:
        event = self.emit(ResponseOutputItemDoneEvent, output_index=len(self.items), item=item)
        self.items.append(item)
        return [event]
