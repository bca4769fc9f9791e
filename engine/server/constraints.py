"""From a request's `response_format`, `structured_outputs` and forced tool calls to one grammar constraint.

As vLLM 0.33 (vllm/entrypoints/generate/base/protocol.py): `response_format` json_object / json_schema
override the matching `structured_outputs` field; a forced tool call adds the tool's JSON schema.
"""

from __future__ import annotations

import asyncio

from kvtool.engine.runtime.structured_output import StructuredOutputsParams
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.protocol import ResponseFormat, StructuredOutputsField
from kvtool.errors import KvtoolError


def structured_outputs_params(structured: StructuredOutputsField | None, response_format: ResponseFormat | None,
                              tool_schema: dict | None = None) -> StructuredOutputsParams | None:
    fields = structured.model_dump(by_alias=True) if structured is not None else {}
    fields = {k: v for k, v in fields.items() if v is not None}
    fields.update(_response_format_fields(response_format))
    if tool_schema is not None:
        fields["json"] = tool_schema
    if not any(key in fields for key in ("json", "regex", "choice", "grammar", "json_object", "structural_tag")):
        if structured is not None and structured.model_fields_set:
            fields["json_object"] = None  # options without a constraint: vLLM's "none are specified" error
        else:
            return None
    try:
        return StructuredOutputsParams(**fields)
    except KvtoolError as err:
        raise APIError(err.message, param="structured_outputs") from err


def _response_format_fields(response_format: ResponseFormat | None) -> dict:
    if response_format is None or response_format.type == "text":
        return {}
    if response_format.type == "json_object":
        return {"json_object": True}
    if response_format.type == "structural_tag":
        raise APIError("response_format type 'structural_tag' is not supported by this server; use json_schema, "
                       "json_object or text.", param="response_format")
    if response_format.json_schema is None or response_format.json_schema.json_schema is None:
        raise APIError("response_format type 'json_schema' needs a `json_schema` with a `schema`.",
                       param="response_format")
    return {"json": response_format.json_schema.json_schema}


async def compile_constraint(engine, params: StructuredOutputsParams | None) -> None:
    """Compile (or find in the cache) before the request is admitted, so that a bad spec is a plain 400."""
    if params is None:
        return
    try:
        await asyncio.to_thread(engine.grammar_compiler.compile, params)
    except KvtoolError as err:
        raise APIError(err.message, param=getattr(err, "param", None)) from err

