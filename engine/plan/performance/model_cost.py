"""What one forward step costs one tensor-parallel rank, per layer and per token: weight bytes, FLOPs,
activation traffic, KV bytes and all-reduce bytes, from the model's shapes and how its weights are stored."""

from dataclasses import dataclass, replace

from kvtool.engine.plan.performance.hardware import GpuFigures
from kvtool.engine.sizing.quantization import NVFP4, QuantFacts, Scheme
from kvtool.engine.sizing.quantization_methods import FP8_BLOCK, MXFP4
from kvtool.engine.sizing.spec import ModelSpec

FP4_SCHEMES = (NVFP4, MXFP4)


@dataclass(frozen=True)
class GemmCost:
    """The GEMMs of one part of a layer on one rank: bytes of weights, FLOPs per token, and the dtype the
    tensor cores run in (`dequantize`: 4- or 8-bit weights widened to it inside the kernel, Marlin-style)."""

    weight_bytes: float
    flops_per_token: float
    dtype: str
    dequantize: bool = False
    block_scaled: bool = False  # fp8 weights in 128 x 128 blocks, activations quantized per 128 values
    launches: int = 1  # GEMM kernels a layer launches for it


@dataclass(frozen=True)
class ModelCost:
    layers: int
    hidden: int
    dense: GemmCost  # attention projections and the dense MLP (shared experts, router) of one layer
    expert: GemmCost | None  # one routed expert of one layer, for one token routed to it
    num_experts: int
    experts_per_token: int
    lm_head: GemmCost
    activation_bytes_per_token: float  # elementwise traffic of one layer (norms, rotary, SiLU, residuals)
    kv_bytes_per_token: float  # one token of one attention layer
    full_attention_layers: int
    sliding_layers: int
    sliding_window: int
    attention_flops_per_pair: float  # one query against one key, one layer: QK^T and PV
    allreduce_bytes_per_token: float  # one all-reduce of one token's hidden state
    tp: int

    @property
    def is_moe(self) -> bool:
        return self.expert is not None


def model_cost(
    spec: ModelSpec,
    facts: QuantFacts | None,
    tp: int,
    kv_bytes_per_token: int,
    gpu: GpuFigures,
    element_bytes: int = 2,
) -> ModelCost:
    """The per-rank costs of `spec` at tensor parallelism `tp`; `kv_bytes_per_token` is plan's, per GPU
    over every attention layer."""
    groups, layers = dict(spec.parameter_groups), spec.num_hidden_layers
    dtype = "fp16" if spec.dtype == "float16" else "bf16"
    sliding = sum(kind == "sliding_attention" for kind in spec.layer_types)
    attention_layers = max(1, spec.num_attention_layers)
    q_heads = spec.num_attention_heads / tp
    return ModelCost(
        layers=layers,
        hidden=spec.hidden_size,
        dense=_dense_gemm(spec, groups, tp, facts, dtype, gpu),
        expert=_expert_gemm(spec, groups, facts, tp, dtype, gpu),
        num_experts=spec.num_experts or 0,
        experts_per_token=int(spec.num_experts_per_tok or 0),
        lm_head=_lm_head(spec, tp, element_bytes, dtype),
        activation_bytes_per_token=element_bytes * _elementwise_elements(spec, tp),
        kv_bytes_per_token=kv_bytes_per_token / attention_layers,
        full_attention_layers=attention_layers - sliding,
        sliding_layers=sliding,
        sliding_window=spec.sliding_window or 0,
        attention_flops_per_pair=4 * q_heads * spec.head_dim,
        allreduce_bytes_per_token=spec.hidden_size * element_bytes,
        tp=tp,
    )


def _gemm(params: float, facts: QuantFacts | None, part: str, dtype: str, gpu: GpuFigures) -> GemmCost:
    scheme = facts.scheme(part) if facts else None
    stored = scheme.bytes_per_weight if scheme else 2
    compute = _compute_dtype(scheme, facts.method if facts else "", dtype, gpu)
    dequantize = scheme is not None and compute == dtype
    return GemmCost(
        params * stored, 2 * params, compute, dequantize, block_scaled=scheme == FP8_BLOCK and compute == "fp8"
    )


def _dense_gemm(spec: ModelSpec, groups: dict, tp: int, facts, dtype: str, gpu: GpuFigures) -> GemmCost:
    """Attention projections (qkv, o) and, where the model has them beside its router, the dense MLP or shared
    experts (gate_up, down) of one layer."""
    layers = spec.num_hidden_layers
    gemm = _gemm((groups.get("attention", 0) + groups.get("mlp", 0)) / layers / tp, facts, "attention", dtype, gpu)
    router = layers * spec.hidden_size * (spec.num_experts or 0)
    return replace(gemm, launches=2 + 2 * (groups.get("mlp", 0) > 2 * router))


def _expert_gemm(spec, groups, facts, tp, dtype, gpu) -> GemmCost | None:
    if not spec.num_experts or not groups.get("experts"):
        return None
    per_expert = groups["experts"] / spec.num_hidden_layers / spec.num_experts / tp
    return _gemm(per_expert, facts, "experts", dtype, gpu)


def _lm_head(spec: ModelSpec, tp: int, element_bytes: int, dtype: str) -> GemmCost:
    """The output layer, split by vocabulary over the ranks and kept in the model dtype."""
    params = spec.vocab_size * spec.hidden_size / tp
    return GemmCost(params * element_bytes, 2 * params, dtype)


def _compute_dtype(scheme: Scheme | None, method: str, dtype: str, gpu: GpuFigures) -> str:
    """The tensor-core dtype a quantized GEMM runs in: fp8 weights with fp8 activations where the GPU has fp8
    (W8A8), fp4 where it has fp4; elsewhere the weights are widened to the model dtype (weight-only)."""
    if scheme is None:
        return dtype
    if scheme.bits == 8 and gpu.peak_flops("fp8") and ("fp8" in method or method in ("modelopt", "compressed-tensors")):
        return "fp8"
    if scheme in FP4_SCHEMES and gpu.peak_flops("fp4"):
        return "fp4"
    return dtype


def _elementwise_elements(spec: ModelSpec, tp: int) -> float:
    """Elements read and written per token by one layer's non-GEMM kernels: two fused add + RMSNorm (4 hidden
    each), rotary and attention in/out over q, k, v, the MLP's gate/up output through SiLU-and-mul (or each
    routed expert's), and the GEMM inputs and outputs themselves."""
    qkv = (spec.num_attention_heads + 2 * spec.num_key_value_heads) * spec.head_dim / tp
    intermediate = (spec.moe_intermediate_size or spec.intermediate_size) / tp
    routed = int(spec.num_experts_per_tok or 1) if spec.num_experts else 1
    return 12 * spec.hidden_size + 4 * qkv + routed * 6 * intermediate
