"""Small facts every Triton kernel wrapper needs: interpreter mode, dot dtypes, fp8 limits."""

import os

import torch
import triton.language as tl

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def dot_dtype(dtype: torch.dtype):
    """Operand dtype for tl.dot: the activations' own on a GPU, fp32 in the interpreter (no bf16 math)."""
    if interpreting() or dtype == torch.float32:
        return tl.float32
    return tl.bfloat16 if dtype == torch.bfloat16 else tl.float16


def dot_precision(dtype: torch.dtype) -> str:
    """fp32 models get exact fp32 dots ("ieee"), not TF32's 10-bit mantissa."""
    return "ieee" if dtype == torch.float32 else "tf32"


def fp8_max(cache_dtype: torch.dtype) -> float:
    """Largest finite value of an fp8 cache (quantized values are clamped to it); 0 for other caches."""
    return FP8_MAX.get(cache_dtype, 0.0)
