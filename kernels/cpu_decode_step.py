"""The one-call CPU decode step (cpu/decode_step.c) from Python: the structs it reads, which linear layers and
shapes it computes, and the call itself. The engine reaches it as `get_ops(device).decode_step` on the C
kernels' backend; runtime/worker/fused_decode.py fills the structs from a model."""

import ctypes
import sys

import torch

from kvtool.kernels.cpu_build import compiled_library
from kvtool.kernels.cpu_linear import PackedLinear
from kvtool.kernels.cpu_ops import (
    DECODE_HEAD_DIM_MULTIPLE,
    DTYPE_CODES,
    SMALL_LINEAR_K_MULTIPLE,
    raise_if_out_of_memory,
)
from kvtool.kernels.quant_linear import QuantLinear
from kvtool.kernels.reference import QUANT_GROUP

__all__ = ["DECODE_HEAD_DIM_MULTIPLE", "DTYPE_CODES", "Layer", "Step", "fusable", "linear_struct", "row_limit", "run"]

_p, _i64, _i32, _f = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float
LINEAR_NAMES = ("qkv", "o", "gate_up", "down")
PLAIN, PANELS, AMX_TILES = 0, 1, 2  # Linear.panels in cpu/decode_step.c: how a weight is laid out or multiplied


class Linear(ctypes.Structure):
    """Mirrors `Linear` in cpu/decode_step.c: a plain weight, column panels, AMX tiles, or codes with scales (and
    mins)."""

    _fields_ = [(name, _p) for name in ("weight", "bias", "scales", "mins")]
    _fields_ += [("bits", _i64), ("panels", _i64)]


class Layer(ctypes.Structure):
    """Mirrors `Layer` in cpu/decode_step.c."""

    _fields_ = [("input_norm", _p), ("post_norm", _p)] + [(name, Linear) for name in LINEAR_NAMES]
    _fields_ += [("k_cache", _p), ("v_cache", _p), ("cos_sin", _p), ("sliding_window", _i64)]


class Step(ctypes.Structure):
    """Mirrors `Step` in cpu/decode_step.c."""

    _fields_ = [("layers", _p)]
    _fields_ += [(name, _i64) for name in ("num_layers", "rows", "hidden", "num_heads", "num_kv_heads", "head_dim")]
    _fields_ += [("intermediate", _i64), ("block_size", _i64), ("table_stride", _i64), ("eps", _f), ("scale", _f)]
    _fields_ += [("dtype", _i32), ("num_threads", _i32), ("cache_dtype", _i32)]
    _fields_ += [(name, _p) for name in ("positions", "slot_mapping", "block_tables", "context_lens", "x", "residual")]
    _fields_ += [(name, _p) for name in ("normed", "qkv", "q_rot", "k_rot", "attn", "gate_up", "act")]
    _fields_ += [(name, _p) for name in ("input_ids", "embed", "final_norm")]
    _fields_ += [("lm_head", Linear), ("vocab", _i64), ("head_out", _p), ("logits", _p)]


def run(step: Step, rows: int) -> None:
    """The step, in place: MemoryError when the C code could not allocate its scratch."""
    status = compiled_library().kvtool_decode_step(ctypes.addressof(step))
    raise_if_out_of_memory(status, "decode_step", rows)


def fusable(linear, dtype: torch.dtype) -> bool:
    """A PackedLinear with its panels or plain weight kept, or a QuantLinear in an fp32 model, of a width the
    kernel takes."""
    if isinstance(linear, QuantLinear):
        bias_ok = linear.bias is None or (linear.bias.dtype == torch.float32 and linear.bias.is_contiguous())
        return dtype == torch.float32 and linear.in_features % QUANT_GROUP == 0 and bias_ok
    if not isinstance(linear, PackedLinear):
        return False
    if linear.panels is not None or linear.amx_tiles is not None:
        return linear.bias is None or linear.bias.is_contiguous()
    return linear.plain_weight is not None and linear.plain_weight.shape[1] % SMALL_LINEAR_K_MULTIPLE == 0


def row_limit(linear) -> int:
    """Beyond these rows a PackedLinear hands them to oneDNN; a QuantLinear's kernels take any row count."""
    if isinstance(linear, QuantLinear):
        return sys.maxsize
    if linear.amx_tiles is not None:
        return linear.amx_rows
    return linear.panel_rows if linear.panels is not None else linear.plain_rows


def linear_struct(linear) -> Linear:
    if isinstance(linear, QuantLinear):
        parts = (linear.codes, linear.bias, linear.scales, linear.mins)
        layout = AMX_TILES if linear.on_tiles else PANELS
        return Linear(*(address(t) for t in parts), linear.bits, layout)
    if linear.amx_tiles is not None:
        return Linear(address(linear.amx_tiles), address(linear.bias), None, None, 0, AMX_TILES)
    if linear.panels is not None:
        return Linear(address(linear.panels), address(linear.bias), None, None, 0, PANELS)
    return Linear(address(linear.plain_weight), address(linear.bias), None, None, 0, PLAIN)


def address(tensor: torch.Tensor | None) -> int | None:
    return None if tensor is None else tensor.data_ptr()
