"""Linear layers whose weights are reordered once, at load time, into oneDNN's blocked layout.

On CPU a bf16 `nn.Linear` leaves the weight in its plain layout and oneDNN works around that on
every call; for decode-sized batches the prepacked weight makes each matmul markedly faster (see
docs/engine.md). Results are bit-identical. Only bf16 on CPUs where oneDNN supports it is packed.
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
    return (
        device.type == "cpu"
        and dtype == torch.bfloat16
        and cpu_kernels_enabled()
        and torch.backends.mkldnn.is_available()
        and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


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
