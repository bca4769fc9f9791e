"""GGUF weights kept quantized: each linear layer's codes, scales and mins, read from the file as is.

Every supported type becomes groups of 32 weights along k with w = scale * code + min, exactly (the
scales and mins are products of fp16 and small integers, exact in fp32): Q4_0, Q4_1 and Q4_K as
4-bit codes, Q8_0, Q5_0, Q5_1 and Q5_K as 8-bit codes. Q4_K and Q5_K's 6-bit sub-block scales and
mins are multiplied out per group of 32.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.gguf_spec import DENSE_TYPES
from kvtool.errors import UsageError

GROUP, SUPER = 32, 256
# q/k rows that llama.cpp's converter interleaves for its rotary layout (transformers undoes it alike)
PERMUTED_ARCHS = ("llama",)
# the HF names a packed linear of the engine's models is made of
PACKED_PARTS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


@dataclass
class QuantizedWeight:
    codes: np.ndarray  # [n, k] integer codes
    scales: np.ndarray  # [n, k / 32] fp32
    mins: np.ndarray | None  # [n, k / 32] fp32, or None where every min is 0
    bits: int  # 4 or 8: how the codes are packed

    def rows(self, order) -> "QuantizedWeight":
        mins = None if self.mins is None else self.mins[order]
        return QuantizedWeight(self.codes[order], self.scales[order], mins, self.bits)


def _fp16(raw: np.ndarray) -> np.ndarray:
    return raw.view(np.float16).astype(np.float32)


def _low_high(qs: np.ndarray) -> np.ndarray:
    """[b, 16] bytes -> [b, 32] codes: low nibbles first, then high nibbles (Q4_0's layout)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _fifth_bit(qh: np.ndarray) -> np.ndarray:
    return np.unpackbits(qh, axis=-1, bitorder="little")


def _q8_0(b):
    return b[:, 2:].view(np.int8), _fp16(b[:, :2])[:, 0], None, 8


def _q4_0(b):
    d = _fp16(b[:, :2])[:, 0]
    return _low_high(b[:, 2:]), d, -8 * d, 4


def _q4_1(b):
    return _low_high(b[:, 4:]), _fp16(b[:, :2])[:, 0], _fp16(b[:, 2:4])[:, 0], 4


def _q5_0(b):
    codes = _low_high(b[:, 6:]) | (_fifth_bit(b[:, 2:6]) << 4)
    return codes.astype(np.int8) - 16, _fp16(b[:, :2])[:, 0], None, 8


def _q5_1(b):
    codes = _low_high(b[:, 8:]) | (_fifth_bit(b[:, 4:8]) << 4)
    return codes.astype(np.int8), _fp16(b[:, :2])[:, 0], _fp16(b[:, 2:4])[:, 0], 8


def _k_scales(b):
    """Per group of 32 of each super-block of 256: scale d * sc and min -dmin * m."""
    from gguf.quants import Q4_K

    sc, m = Q4_K.get_scale_min(b[:, 4:16].copy())
    return _fp16(b[:, :2]) * sc.astype(np.float32), -_fp16(b[:, 2:4]) * m.astype(np.float32)


def _q4_k(b):
    qs = b[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    scales, mins = _k_scales(b)
    return (qs & 0x0F).reshape(-1, GROUP), scales.ravel(), mins.ravel(), 4


def _q5_k(b):
    ql = b[:, 48:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    qh = b[:, 16:48].reshape(-1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    codes = (ql & 0x0F).reshape(-1, 8, 32) | ((qh & 1) << 4)
    scales, mins = _k_scales(b)
    return codes.reshape(-1, GROUP).astype(np.int8), scales.ravel(), mins.ravel(), 8


# type name -> (bytes per block, weights per block, decoder of [blocks, bytes] -> per-group codes etc.)
DECODERS = {
    "Q8_0": (34, GROUP, _q8_0),
    "Q4_0": (18, GROUP, _q4_0),
    "Q4_1": (20, GROUP, _q4_1),
    "Q5_0": (22, GROUP, _q5_0),
    "Q5_1": (24, GROUP, _q5_1),
    "Q4_K": (144, SUPER, _q4_k),
    "Q5_K": (176, SUPER, _q5_k),
}


def decode_tensor(data: np.ndarray, type_name: str, name: str) -> QuantizedWeight:
    """A GGUF tensor's raw bytes [n, bytes per row] as codes [n, k], scales and mins [n, k / 32]."""
    if type_name not in DECODERS:
        raise UsageError(
            msg.GGUF_TYPE_UNSUPPORTED.format(name=name, type=type_name, types=", ".join(DECODERS)),
            fix=msg.GGUF_TYPE_UNSUPPORTED_FIX,
        )
    block_bytes, _, decode = DECODERS[type_name]
    n = data.shape[0]
    codes, scales, mins, bits = decode(np.ascontiguousarray(data).reshape(-1, block_bytes))
    mins = None if mins is None else mins.reshape(n, -1).astype(np.float32)
    return QuantizedWeight(codes.reshape(n, -1), scales.reshape(n, -1).astype(np.float32), mins, bits)


def quantized_linears(gguf_path: Path, model) -> dict[str, QuantizedWeight]:
    """module name -> the quantized weight of every linear layer of `model` stored quantized in the file."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))
    tensors = {t.name: t for t in reader.tensors}
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    names = gguf.get_tensor_name_map(_model_arch(arch), model.config.num_hidden_layers)
    found = {}
    for module_name, parts in _linear_parts(model):
        gguf_names = [_gguf_name(names, part, tensors) for part in parts]
        if all(n is not None and tensors[n].tensor_type.name not in DENSE_TYPES for n in gguf_names):
            weights = [_read(tensors[n], n, arch, model.config) for n in gguf_names]
            found[module_name] = _stack(weights)
    return found


def _linear_parts(model):
    from torch import nn

    for module_name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            prefix, _, last = module_name.rpartition(".")
            yield module_name, [f"{prefix}.{part}" if prefix else part for part in PACKED_PARTS.get(last, (last,))]


def _gguf_name(names, hf_name: str, tensors) -> str | None:
    name = names.get_name(hf_name)
    if hf_name == "lm_head" and f"{name}.weight" not in tensors:
        name = names.get_name("model.embed_tokens")  # tied: the output layer is the embedding
    return f"{name}.weight" if name and f"{name}.weight" in tensors else None


def _read(tensor, name: str, arch: str, config) -> QuantizedWeight:
    weight = decode_tensor(tensor.data, tensor.tensor_type.name, name)
    if arch in PERMUTED_ARCHS and (".attn_q." in name or ".attn_k." in name):
        heads = config.num_attention_heads if ".attn_q." in name else config.num_key_value_heads
        order = np.arange(weight.codes.shape[0]).reshape(heads, -1, 2).swapaxes(1, 2).ravel()
        weight = weight.rows(order)
    return weight


def _stack(weights: list[QuantizedWeight]) -> QuantizedWeight:
    if len(weights) == 1:
        return weights[0]
    if len({w.bits for w in weights}) > 1 or len({w.mins is None for w in weights}) > 1:
        weights = [_with_mins(_as_8bit(w)) for w in weights]  # mixed types in one packed layer
    mins = None if weights[0].mins is None else np.concatenate([w.mins for w in weights])
    return QuantizedWeight(
        np.concatenate([w.codes for w in weights]), np.concatenate([w.scales for w in weights]), mins, weights[0].bits
    )


def _as_8bit(weight: QuantizedWeight) -> QuantizedWeight:
    return QuantizedWeight(weight.codes.astype(np.int8), weight.scales, weight.mins, 8)


def _with_mins(weight: QuantizedWeight) -> QuantizedWeight:
    mins = weight.mins if weight.mins is not None else np.zeros_like(weight.scales)
    return QuantizedWeight(weight.codes, weight.scales, mins, weight.bits)


def _model_arch(arch: str):
    import gguf

    by_name = {name: value for value, name in gguf.MODEL_ARCH_NAMES.items()}
    if arch not in by_name:
        raise UsageError(msg.GGUF_ARCH_UNKNOWN.format(arch=arch), fix=msg.GGUF_TYPE_UNSUPPORTED_FIX)
    return by_name[arch]


def apply_quantized_weights(model, gguf_path: Path) -> int:
    """Swap each linear layer stored quantized in the GGUF file for a QuantLinear; returns how many."""
    from kvtool.kernels.quant_linear import QuantLinear

    found = quantized_linears(gguf_path, model)
    for module_name, weight in found.items():
        parent_name, _, child = module_name.rpartition(".")
        parent = model.get_submodule(parent_name)
        bias = getattr(parent, child).bias
        setattr(parent, child, QuantLinear(weight.codes, weight.scales, weight.mins, weight.bits, bias))
    return len(found)
