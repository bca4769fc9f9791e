"""Linear layers whose weights stay quantized: GGUF-style codes in groups of 32 along k, each group
with an fp32 scale and an optional min (w = scale * code + min), multiplied by the C kernel
(`cpu_ops.quant_linear`) or, without a compiler, by its torch reference. A call of more rows than
`cpu_ops.quant_kernel_rows()` keeps x in fp32: where panels apply (AVX2 CPUs) they go to
`cpu_ops.quant_panel_linear`, which dequantizes a second copy of the codes, kept in panels, a block at a
time into panel_linear's tiles; elsewhere the call dequantizes the whole weight for an fp32 matmul."""

import torch
from torch import nn

from kvtool.kernels import cpu_ops, reference
from kvtool.kernels.reference import QUANT_GROUP, dequantize_codes


class QuantLinear(nn.Module):
    """y = x W^T + b for W [n, k] given as integer codes [n, k] with scales and mins [n, k / 32]."""

    def __init__(self, codes, scales, mins, bits: int, bias: torch.Tensor | None = None):
        super().__init__()
        self.bits = bits
        self.out_features, self.in_features = codes.shape
        self.register_buffer("codes", pack_codes(torch.as_tensor(codes), bits))
        self.register_buffer("scales", torch.as_tensor(scales, dtype=torch.float32).contiguous())
        self.register_buffer("mins", None if mins is None else torch.as_tensor(mins, dtype=torch.float32).contiguous())
        self.bias = None if bias is None else bias.detach()
        self.int8_rows = cpu_ops.quant_kernel_rows()  # up to these rows, x quantized for the int8 kernel
        in_panels = cpu_ops.panel_linear_wins()  # then more rows than int8_rows take quant_panel_linear
        self.panels = reference.pack_quant_panels(self.codes, self.scales, self.mins, bits) if in_panels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        weight = (self.codes, self.scales, self.mins, self.bits)
        if len(rows) <= self.int8_rows:
            y = cpu_ops.quant_linear(rows, *weight)
        elif self.panels is not None:
            y = cpu_ops.quant_panel_linear(rows, *self.panels, self.bits, self.out_features)
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
