"""Linear layers whose weights are reordered once, at load time, into oneDNN's blocked layout.

On CPU an `nn.Linear` leaves the weight in its plain layout and the GEMM library works around that
on every call; for decode-sized batches the prepacked weight makes each matmul markedly faster (see
docs/engine.md). bf16 is packed where oneDNN supports it (results are bit-identical); fp32 always
(oneDNN's fp32 GEMM sums in another order than MKL's: results are one rounding step apart).
`benchmarks/linear_bench.py` compares oneDNN's packing with MKL's packed GEMM at decode sizes.
"""

import torch
from torch import nn

from kvtool.kernels.cpu_build import cpu_kernels_enabled

BATCH_HINT = 64  # the row count oneDNN tunes the layout for; any row count works


class PackedLinear(nn.Module):
    """y = x W^T + b with W held as an opaque oneDNN tensor."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.packed_weight = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), BATCH_HINT)
        self.bias = None if bias is None else bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    if device.type != "cpu" or not cpu_kernels_enabled() or not torch.backends.mkldnn.is_available():
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported())


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
