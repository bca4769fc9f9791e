"""Weight bytes of a checkpoint: from its safetensors header counts when known, else from its
`quantization_config` (bits, group size, which modules stay unquantized), else from the dtype."""

from dataclasses import dataclass

from kvtool.errors import UsageError

# Safetensors element types -> bytes; packed 4-bit formats store two values per U8 / eight per I32 element.
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I64": 8,
    "I32": 4,
    "U32": 4,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 0.5,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
# Methods vLLM names with --quantization, and the bits per weight of each when the config says nothing else.
DEFAULT_BITS = {
    "fp8": 8,
    "fbgemm_fp8": 8,
    "modelopt": 8,
    "ptpc_fp8": 8,
    "experts_int8": 8,
    "compressed-tensors": 8,
    "awq": 4,
    "awq_marlin": 4,
    "gptq": 4,
    "gptq_marlin": 4,
    "bitsandbytes": 4,
    "mxfp4": 4,
    "modelopt_fp4": 4,
    "nvfp4": 4,
    "gguf": 4,
}
QUANTIZATION_METHODS = tuple(DEFAULT_BITS)


@dataclass(frozen=True)
class QuantFacts:
    """One checkpoint's quantization: bits per weight, scale bytes per group, and what it covers."""

    method: str
    bits: float = 8
    group_size: int = 0  # weights per scale; 0: per tensor or per channel (scales are negligible)
    scale_bytes: float = 2
    zero_bits: float = 0  # packed zero points per group (GPTQ/AWQ asymmetric)
    scope: str = "linear"  # "linear": every decoder linear layer; "experts": only MoE experts
    attention_unquantized: bool = False

    @property
    def bytes_per_weight(self) -> float:
        per_group = (self.scale_bytes + self.zero_bits / 8) / self.group_size if self.group_size > 0 else 0
        return self.bits / 8 + per_group


def quant_facts(config: dict | None, override: str | None = None) -> QuantFacts | None:
    """The `quantization_config` of an HF config, or the method named with --quantization."""
    quant = config if isinstance(config, dict) else {}
    method = override or quant.get("quant_method") or quant.get("format")
    if not method:
        return None
    method = str(method).lower()
    if method not in DEFAULT_BITS:
        raise UsageError(f"unknown quantization '{method}'.", f"Use one of: {', '.join(QUANTIZATION_METHODS)}.")
    if override and override != quant.get("quant_method"):
        quant = {}  # online quantization of an unquantized checkpoint: the method's own layout
    return _READERS.get(method, _plain)(method, quant)


def _plain(method: str, quant: dict) -> QuantFacts:
    return QuantFacts(method, bits=DEFAULT_BITS[method], attention_unquantized=_keeps_attention(quant))


def _fp8(method: str, quant: dict) -> QuantFacts:
    block = quant.get("weight_block_size")  # DeepSeek-style 128 x 128 blocks with an fp32 scale each
    group = int(block[0]) * int(block[1]) if block else 0
    return QuantFacts(method, bits=8, group_size=group, scale_bytes=4, attention_unquantized=_keeps_attention(quant))


def _gptq_awq(method: str, quant: dict) -> QuantFacts:
    bits = int(quant.get("bits") or quant.get("w_bit") or 4)
    group = int(quant.get("group_size") or quant.get("q_group_size") or 128)
    # fp16 scales and packed zero points per group of weights (stored even for symmetric GPTQ)
    return QuantFacts(
        method,
        bits=bits,
        group_size=max(group, 0),
        scale_bytes=2,
        zero_bits=bits,
        attention_unquantized=_keeps_attention(quant),
    )


def _mxfp4(method: str, quant: dict) -> QuantFacts:
    # 4-bit values in blocks of 32 sharing one 8-bit power-of-two scale; gpt-oss quantizes only its experts
    kept = " ".join(quant.get("modules_to_not_convert") or [])
    return QuantFacts(
        method,
        bits=4,
        group_size=32,
        scale_bytes=1,
        scope="experts" if "attn" in kept else "linear",
        attention_unquantized="attn" in kept,
    )


def _nvfp4(method: str, quant: dict) -> QuantFacts:
    return QuantFacts(method, bits=4, group_size=16, scale_bytes=1, attention_unquantized=_keeps_attention(quant))


def _bitsandbytes(method: str, quant: dict) -> QuantFacts:
    if quant.get("load_in_8bit"):
        return QuantFacts(method, bits=8)
    double = quant.get("bnb_4bit_use_double_quant")  # absmax stored in 8 bits with a second-level fp32 scale
    return QuantFacts(method, bits=4, group_size=64, scale_bytes=1 + 4 / 256 if double else 4)


def _compressed_tensors(method: str, quant: dict) -> QuantFacts:
    groups = quant.get("config_groups") or {}
    weights = next((g.get("weights") for g in groups.values() if isinstance(g, dict) and g.get("weights")), {}) or {}
    bits = int(weights.get("num_bits") or 8)
    kind, strategy = weights.get("type", "int"), weights.get("strategy", "tensor")
    group = int(weights.get("group_size") or 0) if strategy in ("group", "tensor_group") else 0
    if strategy == "block" and weights.get("block_structure"):
        rows, cols = weights["block_structure"]
        group = int(rows) * int(cols)
    scale = 1 if kind == "float" and bits == 4 else 2 if strategy != "block" else 4  # nvfp4: fp8 scales
    zero = bits if not weights.get("symmetric", True) else 0
    return QuantFacts(
        method,
        bits=bits,
        group_size=group,
        scale_bytes=scale,
        zero_bits=zero,
        attention_unquantized=_keeps_attention({"ignore": quant.get("ignore")}),
    )


def _keeps_attention(quant: dict) -> bool:
    kept = " ".join(
        str(m)
        for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules")
        for m in (quant.get(key) or [])
    )
    return "attn" in kept or "attention" in kept


_READERS = {
    "fp8": _fp8,
    "ptpc_fp8": _fp8,
    "gptq": _gptq_awq,
    "gptq_marlin": _gptq_awq,
    "awq": _gptq_awq,
    "awq_marlin": _gptq_awq,
    "mxfp4": _mxfp4,
    "modelopt_fp4": _nvfp4,
    "nvfp4": _nvfp4,
    "bitsandbytes": _bitsandbytes,
    "compressed-tensors": _compressed_tensors,
}


def quantized_weight_bytes(groups: dict[str, int], facts: QuantFacts, dtype_bytes: int) -> int:
    """Bytes of a model's parameter groups when `facts` quantizes its linear layers (or only its experts).

    Embeddings, the output layer and encoder towers stay in the model dtype.
    """
    quantized = {"experts"} if facts.scope == "experts" else {"experts", "mlp", "other"}
    if facts.scope != "experts" and not facts.attention_unquantized:
        quantized.add("attention")
    total = 0.0
    for name, count in groups.items():
        total += count * (facts.bytes_per_weight if name in quantized else dtype_bytes)
    return int(total)


def checkpoint_bytes(dtype_counts: dict[str, int], dtype_bytes: int) -> int:
    """Bytes of a checkpoint from its safetensors element counts per dtype.

    An unquantized checkpoint is loaded in the run dtype; quantized tensors (and the scales stored
    beside them) keep their stored size.
    """
    quantized = any(name not in FLOAT_DTYPES for name in dtype_counts)
    total = 0.0
    for name, count in dtype_counts.items():
        stored = SAFETENSORS_DTYPE_BYTES.get(name, 2)
        total += count * (stored if quantized or name not in FLOAT_DTYPES else dtype_bytes)
    return int(total)
