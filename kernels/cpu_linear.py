"""Linear layers whose weights are reordered once, at load time, into oneDNN's blocked layout.

On CPU an `nn.Linear` leaves the weight in its plain layout and the GEMM library works around that
on every call; for decode-sized batches the prepacked weight makes each matmul markedly faster (see
docs/engine.md). bf16 is packed where oneDNN supports it (results are bit-identical); fp32 always
(oneDNN's fp32 GEMM sums in another order than MKL's: results are one rounding step apart).
`benchmarks/linear_bench.py` compares oneDNN's packing with MKL's packed GEMM at decode sizes.

On AVX2 CPUs without AVX-512 the C kernel `cpu_ops.panel_linear` beat both oneDNN and small_linear at
decode sizes and matched oneDNN at a prefill's (and oneDNN has no bf16 GEMM there), so there the weight
is kept once, as column panels, for every row count.

With AVX-512, at decode batch sizes a step is bound by streaming the weights, and a C kernel streams
its own copy faster than oneDNN reads its blocked one, so that copy is kept beside the packed one for a
few rows: on CPUs with AMX a plain weight for `cpu_ops.small_linear` (SMALL_LINEAR_MAX_ROWS in fp32, and
up to 4 rows in bf16 where the kernel refuses the AMX tile state); on those without (AMD Zen 4) column
panels (up to 8 rows in fp32, 4 in bf16). `cpu_ops.SMALL_ROWS_KERNEL` holds the choice. A bf16 weight on a
CPU whose AMX tiles the kernel grants is kept as tiles for `cpu_amx.amx_linear` instead of the plain copy:
about small_linear's pace at one row, and unlike it nearly the same pace up to 64 rows, where oneDNN's
packed weight took 1.3-2x its time from 4 to 32 rows and about the same at 64 (docs/benchmarks.md).
"""

import sys

import torch
from torch import nn

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.cpu_build import cpu_kernels_enabled

BATCH_HINT = 64  # the row count oneDNN tunes the layout for; any row count works


class PackedLinear(nn.Module):
    """y = x W^T + b with W held as column panels (AVX2 CPUs without AVX-512), else as an opaque oneDNN tensor
    and, for a few rows, as panels or plain for small_linear (AVX-512)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        weight = weight.detach()
        self.out_features = weight.shape[0]
        self.bias = None if bias is None else bias.detach()
        self.panel_rows = cpu_ops.panel_linear_rows(weight.dtype)
        self.panels = reference.pack_panels(weight) if self.panel_rows else None  # up to panel_rows, panel_linear
        only_panels = self.panel_rows == sys.maxsize
        self.packed_weight = None if only_panels else torch.ops.mkldnn._reorder_linear_weight(weight, BATCH_HINT)
        self.amx_rows = cpu_amx.amx_linear_rows() if _fits_amx_tiles(weight) else 0
        self.amx_tiles = reference.pack_amx_tiles(weight) if self.amx_rows else None  # up to amx_rows, amx_linear
        self.plain_rows = 0 if self.amx_rows else cpu_ops.small_linear_rows(weight.dtype)
        self.plain_weight = weight.contiguous() if self.plain_rows else None  # up to plain_rows, small_linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if self.panels is not None and rows <= self.panel_rows:
            y = cpu_ops.panel_linear(x.reshape(rows, -1), self.panels, self.out_features, self.bias)
            return y.view(*x.shape[:-1], self.out_features)
        if self.amx_tiles is not None and rows <= self.amx_rows:
            y = cpu_amx.amx_linear(x.reshape(rows, -1), self.amx_tiles, self.out_features, self.bias)
            return y.view(*x.shape[:-1], self.out_features)
        if self.plain_weight is not None and rows <= self.plain_rows:
            y = cpu_ops.small_linear(x.reshape(rows, -1), self.plain_weight, self.bias)
            return y.view(*x.shape[:-1], y.shape[-1])
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")


def kernel_rows(dtype: torch.dtype) -> int:
    """Up to how many rows a PackedLinear of `dtype` (a weight of whole AMX tiles) runs a C kernel, not oneDNN."""
    if dtype == torch.bfloat16 and cpu_amx.amx_linear_rows():
        return cpu_amx.amx_linear_rows()
    return cpu_ops.panel_linear_rows(dtype) or cpu_ops.small_linear_rows(dtype)


def _fits_amx_tiles(weight: torch.Tensor) -> bool:
    """A bf16 weight of whole AMX tiles: output columns in 16s, k-steps in 32s."""
    n, k = weight.shape
    return weight.dtype == torch.bfloat16 and n % reference.AMX_TILE_COLS == 0 and k % reference.AMX_TILE_K == 0


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    if device.type != "cpu" or not cpu_kernels_enabled() or not torch.backends.mkldnn.is_available():
        return False
    bf16_packs = torch.ops.mkldnn._is_mkldnn_bf16_supported() or cpu_ops.panel_linear_wins()
    return dtype == torch.float32 or (dtype == torch.bfloat16 and bf16_packs)


def pack_linears(model: nn.Module) -> int:
    """Swap every nn.Linear inside `model` for a PackedLinear; returns how many were swapped."""
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear(child.weight, child.bias))
    return len(swaps)
