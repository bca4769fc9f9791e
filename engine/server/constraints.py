"""From a request's `response_format`, `structured_outputs` and forced tool calls to one grammar constraint.

As vLLM 0.33 (vllm/entrypoints/generate/base/protocol.py): `response_format` json_object / json_schema
override the matching `structured_outputs` field; a forced tool call ("required" or named) replaces both
with the tool's JSON schema (vllm/tool_parsers/abstract_tool_parser.py adjust_request). The
engine's InputProcessor compiles the constraint at admission (a schema it cannot compile is a 400);
`precompile` runs that compilation in a worker thread first, so that the event loop never waits on it.
"""

from __future__ import annotations

import asyncio

from kvtool.engine.runtime.structured_output.params import KINDS, StructuredOutputsParams
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.protocol import ResponseFormat, StructuredOutputsField
from kvtool.engine.sizing import messages


def structured_outputs_params(
    structured: StructuredOutputsField | None, response_format: ResponseFormat | None, tool_schema: dict | None = None
) -> StructuredOutputsParams | None:
    """A forced tool call's schema replaces whatever else the request asked for, as vLLM's tool parser does."""
    formatted = _response_format_fields(response_format)  # checked even when a forced call overrides it
    if tool_schema is not None:
        return StructuredOutputsParams(json=tool_schema)
    fields = structured.model_dump(by_alias=True) if structured is not None else {}
    fields = {k: v for k, v in fields.items() if v is not None}
    fields.update(formatted)
    if not any(key in fields for key in KINDS):
        if structured is None or not structured.model_fields_set:
            return None
        fields["json_object"] = None  # options without a constraint: vLLM's "none are specified" error
    return StructuredOutputsParams(**fields)


def _response_format_fields(response_format: ResponseFormat | None) -> dict:
    if response_format is None or response_format.type == "text":
        return {}
    if response_format.type == "json_object":
        return {"json_object": True}
    if response_format.type == "structural_tag":
        what = "response_format type 'structural_tag'"
        raise APIError(messages.STRUCTURAL_TAG_NOT_SUPPORTED.format(what=what), param="response_format")
    if response_format.json_schema is None or response_format.json_schema.json_schema is None:
        raise APIError(messages.JSON_SCHEMA_MISSING, param="response_format")
    return {"json": response_format.json_schema.json_schema}


async def precompile(input_processor, params: StructuredOutputsParams | None) -> None:
    """Compile (or find in the cache) off the event loop; the InputProcessor then finds the grammar cached."""
    if params is not None:
        await asyncio.to_thread(lambda: input_processor.grammar_compiler.compile(params))
