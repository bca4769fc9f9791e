"""Linear layers whose weights stay quantized: GGUF-style codes in groups of 32 along k, each group
with an fp32 scale and an optional min (w = scale * code + min), kept in column panels and multiplied
with x quantized to int8 per group: by `cpu_ops.quant_panel_linear` at every row count, on AMX-INT8 tiles
(`cpu_amx.quant_amx_linear`) where the kernel grants them, or, without a compiler, by the torch reference.
Both kernels do the same arithmetic, so a row's output does not depend on the rows beside it."""

import torch
from torch import nn

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.reference import QUANT_GROUP


class QuantLinear(nn.Module):
    """y = x W^T + b for W [n, k] given as integer codes [n, k] with scales and mins [n, k / 32]."""

    def __init__(self, codes, scales, mins, bits: int, bias: torch.Tensor | None = None):
        super().__init__()
        self.bits = bits
        self.out_features, self.in_features = torch.as_tensor(codes).shape
        weight = (pack_codes(torch.as_tensor(codes), bits), torch.as_tensor(scales, dtype=torch.float32))
        weight += (None if mins is None else torch.as_tensor(mins, dtype=torch.float32),)
        weight = reference.pack_quant_panels(*weight, bits)
        self.on_tiles = cpu_amx.quant_tiles_granted()
        for name, tensor in zip(("codes", "scales", "mins"), weight):
            self.register_buffer(name, None if tensor is None else tensor.contiguous())
        self.bias = None if bias is None else bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        kernel = cpu_amx.quant_amx_linear if self.on_tiles else cpu_ops.quant_panel_linear
        y = kernel(rows, self.codes, self.scales, self.mins, self.bits, self.out_features)
        y = y if self.bias is None else y + self.bias
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}"


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """[n, k] integer codes -> the kernel's bytes: int8 as is, or two 4-bit codes per byte (code i of
    a group of 32 in the low nibble, code i + 16 in the high one)."""
    if bits == 8:
        return codes.to(torch.int8).view(torch.uint8).contiguous()
    groups = codes.to(torch.uint8).view(len(codes), -1, QUANT_GROUP)
    half = QUANT_GROUP // 2
    return (groups[..., :half] | (groups[..., half:] << 4)).flatten(1).contiguous()
