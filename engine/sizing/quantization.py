"""Weight bytes of a checkpoint: from its safetensors header counts when known, else from its
`quantization_config` read part by part (attention, dense MLP, MoE experts), as vLLM's quantization
configs route each layer, else from the dtype."""

from dataclasses import dataclass

from kvtool.engine.sizing.quantization_methods import (
    EXPERTS,
    FP8,
    FP8_BLOCK,
    METHODS,
    MXFP4,
    MXFP8,
    NF4,
    NVFP4,
    Scheme,
)

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
LINEAR_PARTS = ("attention", "mlp", "experts", "other")  # embeddings and encoder towers stay in the model dtype
EXCLUDE_KEYS = ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules", "llm_int8_skip_modules")
# ModelOpt's quant_algo -> storage (model_executor/layers/quantization/modelopt.py LINEAR_ALGOS)
MODELOPT_ALGOS = {
    "FP8": FP8,
    "FP8_PER_CHANNEL_PER_TOKEN": FP8,
    "FP8_PB_WO": FP8_BLOCK,
    "NVFP4": NVFP4,
    "W4A16_NVFP4": NVFP4,
    "MXFP8": MXFP8,
}


@dataclass(frozen=True)
class QuantFacts:
    """One checkpoint's quantization: how each part of the model is stored (absent parts stay unquantized)."""

    method: str
    parts: tuple[tuple[str, Scheme], ...]

    def scheme(self, part: str) -> Scheme | None:
        return dict(self.parts).get(part)

    @property
    def weight_only(self) -> bool:
        """4-bit weights dequantized inside the GEMM (Marlin-style kernels)."""
        return any(scheme.bits <= 4 for _, scheme in self.parts)


def part_of(module: str) -> str | None:
    """The part of the model a module name or pattern from a quantization config points at."""
    name = str(module).lower()
    if "expert" in name and "shared_expert" not in name:
        return "experts"
    if any(key in name for key in ("attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "qkv")):
        return "attention"
    if "router" in name or (name.endswith("gate") and "proj" not in name):
        return None  # MoE router gates: a few thousand weights a layer
    if any(key in name for key in ("mlp", "gate_proj", "up_proj", "down_proj", "shared_expert", "feed_forward")):
        return "mlp"
    return "linear" if name in ("linear", "re:.*") else None


def quant_facts(config: dict | None, override: str | None = None, extra: dict | None = None) -> QuantFacts | None:
    """The `quantization_config` of an HF config, or the method named with --quantization (online
    quantization of an unquantized checkpoint: the method's own layout). `extra` holds config facts beside
    it (model_type, DeepSeek-V4's expert_dtype). Unknown methods are refused before (quantization_methods)."""
    quant = config if isinstance(config, dict) else {}
    method = str(override or quant.get("quant_method") or quant.get("format") or "").lower()
    if not method or method not in METHODS:
        return None
    if override and override != quant.get("quant_method"):
        quant = {}
    facts = _READERS.get(method, _plain)(method, quant)
    return _with_expert_dtype(facts, {**quant, **(extra or {})})


def _facts(method: str, scheme: Scheme, quant: dict, scope: str | None = None) -> QuantFacts:
    """`scheme` on every linear part (or only the experts), less the parts the config keeps unquantized."""
    covered = ("experts",) if (scope or METHODS[method][1]) == EXPERTS else LINEAR_PARTS
    kept = {part_of(m) for key in EXCLUDE_KEYS for m in (quant.get(key) or [])}
    return QuantFacts(method, tuple((part, scheme) for part in covered if part not in kept))


def _plain(method: str, quant: dict) -> QuantFacts:
    return _facts(method, METHODS[method][0], quant)


def _fp8(method: str, quant: dict) -> QuantFacts:
    block = quant.get("weight_block_size")  # DeepSeek-style 128 x 128 blocks with an fp32 scale each
    scheme = Scheme(8, int(block[0]) * int(block[1]), 4) if block else FP8
    return _facts(method, scheme, quant)


def _gptq_awq(method: str, quant: dict) -> QuantFacts:
    bits = int(quant.get("bits") or quant.get("w_bit") or 4)
    group = int(quant.get("group_size") or quant.get("q_group_size") or 128)
    # fp16 scales and packed zero points per group of weights (stored even for symmetric GPTQ)
    return _facts(method, Scheme(bits, max(group, 0), 2, zero_bits=bits), quant)


def _mxfp4(method: str, quant: dict) -> QuantFacts:
    # gpt-oss keeps attention, router and embeddings in bf16 (modules_to_not_convert): only its experts
    kept = " ".join(map(str, quant.get("modules_to_not_convert") or []))
    return _facts(method, MXFP4, quant, EXPERTS if "attn" in kept else None)


def _bitsandbytes(method: str, quant: dict) -> QuantFacts:
    if quant.get("load_in_8bit"):
        return _facts(method, Scheme(8), quant)
    double = quant.get("bnb_4bit_use_double_quant")  # absmax stored in 8 bits with a second-level fp32 scale
    return _facts(method, Scheme(4, 64, 1 + 4 / 256) if double else NF4, quant)


def _compressed_tensors(method: str, quant: dict) -> QuantFacts:
    parts: dict[str, Scheme] = {}
    for group in (quant.get("config_groups") or {}).values():
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            targets = {part_of(t) for t in group.get("targets") or ["Linear"]}
            covered = LINEAR_PARTS if "linear" in targets else [t for t in targets if t]
            parts.update(dict.fromkeys(covered, _compressed_scheme(group["weights"])))
    kept = {part_of(m) for m in quant.get("ignore") or []}
    parts = parts or dict.fromkeys(LINEAR_PARTS, FP8)
    return QuantFacts(method, tuple((part, s) for part, s in parts.items() if part not in kept))


def _compressed_scheme(weights: dict) -> Scheme:
    bits = int(weights.get("num_bits") or 8)
    kind, strategy = weights.get("type", "int"), weights.get("strategy", "tensor")
    group = int(weights.get("group_size") or 0) if strategy in ("group", "tensor_group") else 0
    if strategy == "block" and weights.get("block_structure"):
        rows, cols = weights["block_structure"]
        group = int(rows) * int(cols)
    scale = 1 if kind == "float" and bits == 4 else 2 if strategy != "block" else 4  # nvfp4: fp8 scales
    return Scheme(bits, group, scale, zero_bits=bits if not weights.get("symmetric", True) else 0)


def _modelopt(method: str, quant: dict) -> QuantFacts:
    """ModelOpt's quant_algo, legacy `{"quantization": {...}}` nesting, and MIXED_PRECISION's per-layer algos."""
    quant = quant.get("quantization") if isinstance(quant.get("quantization"), dict) else quant
    algo = str(quant.get("quant_algo") or "").upper()
    if algo != "MIXED_PRECISION":
        return _facts(method, MODELOPT_ALGOS.get(algo, METHODS[method][0]), quant)
    votes: dict[str, dict[Scheme, int]] = {}
    for name, recipe in (quant.get("quantized_layers") or {}).items():
        scheme = MODELOPT_ALGOS.get(str(recipe.get("quant_algo", "")).upper()) if isinstance(recipe, dict) else None
        part = part_of(name)
        if scheme and part in LINEAR_PARTS:
            counts = votes.setdefault(part, {})
            counts[scheme] = counts.get(scheme, 0) + 1
    return QuantFacts(method, tuple((part, max(counts, key=counts.get)) for part, counts in votes.items()))


def _with_expert_dtype(facts: QuantFacts, config: dict) -> QuantFacts:
    """DeepSeek-V4 keeps its routed experts in MXFP4 when `expert_dtype` is fp4, its default
    (models/deepseek_v4 quant_config: fp8 128 x 128 blocks for the linear layers)."""
    expert_dtype = config.get("expert_dtype")
    if expert_dtype is None and str(config.get("model_type", "")).startswith("deepseek_v4"):
        expert_dtype = "fp4"
    if str(expert_dtype).lower() != "fp4":
        return facts
    return QuantFacts(facts.method, (*((p, s) for p, s in facts.parts if p != "experts"), ("experts", MXFP4)))


_READERS = {
    "fp8": _fp8,
    "ptpc_fp8": _fp8,
    "deepseek_v4_fp8": _fp8,
    "gptq": _gptq_awq,
    "gptq_marlin": _gptq_awq,
    "auto_gptq": _gptq_awq,
    "awq": _gptq_awq,
    "awq_marlin": _gptq_awq,
    "auto_awq": _gptq_awq,
    "moe_wna16": _gptq_awq,
    "mxfp4": _mxfp4,
    "gpt_oss_mxfp4": _mxfp4,
    "bitsandbytes": _bitsandbytes,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
    "modelopt_fp4": _modelopt,
    "modelopt_mixed": _modelopt,
}


def quantized_weight_bytes(groups: dict[str, int], facts: QuantFacts, dtype_bytes: int) -> int:
    """Bytes of a model's parameter groups stored as `facts` says; the rest in the model dtype."""
    total = 0.0
    for name, count in groups.items():
        scheme = facts.scheme(name)
        total += count * (scheme.bytes_per_weight if scheme else dtype_bytes)
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
