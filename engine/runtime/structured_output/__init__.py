"""Structured outputs: a grammar per request, compiled once per spec, masking the logits at every step."""

from kvtool.engine.runtime.structured_output.params import StructuredOutputsParams

__all__ = ["StructuredOutputsParams"]
