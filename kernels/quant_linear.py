"""Linear layers whose weights stay quantized: GGUF-style codes in groups of 32 along k, each group
with an fp32 scale and an optional min (w = scale * code + min), multiplied by a C kernel with x
quantized to int8 per group, or, without a compiler, by its torch reference. Where panels apply (AVX2
CPUs without AVX-512) the codes are kept in column panels for `cpu_ops.quant_panel_linear` at every row
count; elsewhere they stay row by row for `cpu_ops.quant_linear` (on AMX-INT8 tiles from a few rows where
the kernel grants them and KVTOOL_QUANT_TILES=1 chooses them: `cpu_amx.quant_amx_linear`), and a call of
more rows than `cpu_ops.QUANT_KERNEL_WINS_UP_TO` dequantizes the whole weight for an fp32 matmul instead."""

import torch
from torch import nn

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.reference import QUANT_GROUP, dequantize_codes


class QuantLinear(nn.Module):
    """y = x W^T + b for W [n, k] given as integer codes [n, k] with scales and mins [n, k / 32]."""

    def __init__(self, codes, scales, mins, bits: int, bias: torch.Tensor | None = None):
        super().__init__()
        self.bits = bits
        self.out_features, self.in_features = torch.as_tensor(codes).shape
        self.in_panels = cpu_ops.panel_linear_wins()  # codes, scales and mins in reference.pack_quant_panels' layout
        weight = (pack_codes(torch.as_tensor(codes), bits), torch.as_tensor(scales, dtype=torch.float32))
        weight += (None if mins is None else torch.as_tensor(mins, dtype=torch.float32),)
        self.on_tiles = not self.in_panels and cpu_amx.quant_tiles_chosen()
        if self.in_panels:
            weight = reference.pack_quant_panels(*weight, bits)
        for name, tensor in zip(("codes", "scales", "mins"), weight):
            self.register_buffer(name, None if tensor is None else tensor.contiguous())
        self.bias = None if bias is None else bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        weight = (self.codes, self.scales, self.mins, self.bits)
        if self.in_panels:
            y = cpu_ops.quant_panel_linear(rows, *weight, self.out_features)
        elif len(rows) <= cpu_ops.QUANT_KERNEL_WINS_UP_TO:
            y = (cpu_amx.quant_amx_linear if self.on_tiles else cpu_ops.quant_linear)(rows, *weight)
        else:
            y = nn.functional.linear(rows.float(), dequantize_codes(*weight))
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
