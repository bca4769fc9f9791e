"""The engine flags `plan` and `serve` share, declared once, and one parser for each kind of value they take.

The parsers run while Typer reads the command line: a value they refuse is a UsageError, which reaches the
user as the same one line (`kvtool: error: ...`, status 2) from either command.
"""

from typing import Annotated

import typer

from kvtool.cli.typer_click import FloatParamType, IntParamType, ParamType
from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.context_length import parse_max_model_len
from kvtool.engine.sizing.units import parse_bytes
from kvtool.errors import UsageError

MODEL, ENGINE = "Model", "Engine"


class Count(IntParamType):
    """A whole number of at least 1: sequences, tokens, GPUs, parallel ranks."""

    def convert(self, value, param, ctx) -> int:
        number = super().convert(value, param, ctx)
        if number < 1:
            flag = param.opts[0]
            raise UsageError(f"{flag} must be at least 1, got {number}.", f"Use a positive {flag}.")
        return number


class Fraction(FloatParamType):
    """A share of memory in (0, 1]."""

    def convert(self, value, param, ctx) -> float:
        number = super().convert(value, param, ctx)
        if not 0 < number <= 1:
            flag = param.opts[0]
            raise UsageError(f"{flag} must be in (0, 1], got {number}.", f"Use e.g. {flag} 0.9.")
        return number


class Length(ParamType):
    """A context length as vLLM reads it: 20000, 8k (8000), 8K (8192), or auto / -1 (AUTO_MAX_MODEL_LEN)."""

    name = "length"

    def convert(self, value, param, ctx) -> int:
        return parse_max_model_len(value)


class ByteSize(ParamType):
    """A memory size: 23.58GiB, 24GB, 80G (binary), or bytes."""

    name = "size"

    def convert(self, value, param, ctx) -> int:
        return parse_bytes(value, param.opts[0])


COUNT, FRACTION, LENGTH, BYTE_SIZE = Count(), Fraction(), Length(), ByteSize()

Dtype = Annotated[str, typer.Option(help=f"Weights dtype: {', '.join(defaults.DTYPES)}.", rich_help_panel=MODEL)]
Quantization = Annotated[
    str | None,
    typer.Option(
        help="Weights quantization: fp8, awq, gptq, mxfp4, ...; gguf keeps a GGUF file's weights quantized (the "
        "CPU engine's one) \\[default: from the config; gguf for a GGUF file on CPU without --dtype].",
        rich_help_panel=MODEL,
    ),
]
MaxModelLen = Annotated[
    int | None,
    typer.Option(
        click_type=LENGTH,
        help="Longest prompt + output: 20000, 8k, 8K, or auto (the largest that fits) \\[default: from the config].",
        rich_help_panel=ENGINE,
    ),
]
KvCacheDtype = Annotated[
    str | None, typer.Option(help=", ".join(defaults.KV_CACHE_DTYPES) + ".", rich_help_panel=ENGINE)
]
MaxNumSeqs = Annotated[
    int | None,
    typer.Option(
        click_type=COUNT, help="Most sequences per step \\[default: vLLM's for the device].", rich_help_panel=ENGINE
    ),
]
MaxNumBatchedTokens = Annotated[
    int | None,
    typer.Option(
        click_type=COUNT, help="Most tokens per step \\[default: vLLM's for the device].", rich_help_panel=ENGINE
    ),
]
GpuMemoryUtilization = Annotated[
    float | None,
    typer.Option(
        click_type=FRACTION,
        help="Fraction of each GPU's memory to use \\[default: vLLM's, 0.92 from 0.20, 0.9 before].",
        rich_help_panel=ENGINE,
    ),
]
KvCacheMemory = Annotated[
    int | None,
    typer.Option(
        click_type=BYTE_SIZE,
        help="KV-cache size given outright, e.g. 2GiB (vLLM's --kv-cache-memory-bytes): the CPU engine's budget; "
        "on a GPU it replaces the fraction.",
        rich_help_panel=ENGINE,
    ),
]
