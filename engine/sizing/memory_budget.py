"""Where a GPU's memory goes before the KV cache (vLLM 0.33 v1 profiling, estimated without a GPU).

KV budget = ceil(total x gpu_memory_utilization) - weights - activation peak - non-torch memory - CUDA graphs.
Weights follow from the parameter count; the other three terms are estimates of what vLLM's profiling run
measures, documented in docs/plan.md.
"""

import math
from dataclasses import dataclass
from pathlib import Path

from kvtool.engine.sizing.defaults import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DTYPES,
    SMALL_GPU_SCHEDULER_LIMITS,
)
from kvtool.engine.sizing.hf_config import DTYPE_NAMES
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import UsageError

MiB = 1 << 20
# Bytes per weight for quantization methods: 4-bit formats carry group scales (~4.25 bits).
QUANT_BYTES_PER_PARAM = {
    "fp8": 1.0, "fbgemm_fp8": 1.0, "modelopt": 1.0, "compressed-tensors": 1.0, "experts_int8": 1.0,
    "awq": 0.53, "awq_marlin": 0.53, "gptq": 0.53, "gptq_marlin": 0.53, "bitsandbytes": 0.53,
    "mxfp4": 0.53, "modelopt_fp4": 0.53, "gguf": 0.6,
}
NON_TORCH_BYTES = 256 * MiB  # CUDA context growth, cuBLAS workspaces
NCCL_BYTES = 512 * MiB  # communicator buffers, custom all-reduce (tp or pp > 1)
CUDAGRAPH_BYTES_PER_LAYER = 8 * MiB
CUDAGRAPH_MAX_CAPTURE_TOKENS = 512
SAMPLER_LOGITS_COPIES = 2  # fp32 logits and their softmax during the sampler warm-up


@dataclass(frozen=True)
class MemoryBudget:
    total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int  # ceil(total x utilization)
    weights_bytes: int  # per GPU
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_memory_bytes: int | None = None  # given outright (vLLM's --kv-cache-memory-bytes): no profiling

    @property
    def non_kv_cache_bytes(self) -> int:
        return self.weights_bytes + self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes

    @property
    def kv_cache_bytes(self) -> int:
        """What is left for the KV cache (negative when the rest already overflows)."""
        if self.kv_cache_memory_bytes is not None:
            return self.kv_cache_memory_bytes
        return self.requested_bytes - self.non_kv_cache_bytes


def resolve_dtype(dtype: str, checkpoint_dtype: str | None, bf16_supported: bool = True) -> str:
    """vLLM's `--dtype`: `auto` keeps a 16-bit checkpoint dtype and runs anything else in bfloat16
    (float16 on devices without bfloat16)."""
    if dtype == "auto":
        name = DTYPE_NAMES.get(str(checkpoint_dtype).removeprefix("torch."))
        if name in ("bfloat16", "float16"):
            return name
        return "bfloat16" if bf16_supported else "float16"
    if dtype not in DTYPE_NAMES:
        raise UsageError(f"unknown dtype '{dtype}'.", f"Use one of: {', '.join(DTYPES)}.")
    return DTYPE_NAMES[dtype]


def weights_bytes(spec: ModelSpec, dtype: str = "auto", quantization: str | None = None) -> int:
    """All weights of the model, on all GPUs together."""
    if spec.source.endswith(".gguf") and Path(spec.source).is_file() and quantization in (None, "gguf"):
        return Path(spec.source).stat().st_size
    method = quantization or spec.quantization
    if method:
        if method not in QUANT_BYTES_PER_PARAM:
            raise UsageError(f"unknown quantization '{method}'.", f"Use one of: {', '.join(QUANT_BYTES_PER_PARAM)}.")
        return int(spec.num_parameters * QUANT_BYTES_PER_PARAM[method])
    return spec.num_parameters * (4 if resolve_dtype(dtype, spec.dtype) == "float32" else 2)


def activation_bytes(spec: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int, dtype: str = "auto",
                     tp: int = 1) -> int:
    """Peak of the profiling forward pass: one batch of max_num_batched_tokens, then the sampler's logits."""
    forward = max_num_batched_tokens * _activation_bytes_per_token(spec, dtype, tp)
    sampler = max_num_seqs * spec.vocab_size * 4 * SAMPLER_LOGITS_COPIES
    return forward + sampler


def _activation_bytes_per_token(spec: ModelSpec, dtype: str, tp: int) -> int:
    """Live tensors of one layer per token: residual stream copies, q/k/v, and the gated MLP's input."""
    element = 4 if resolve_dtype(dtype, spec.dtype) == "float32" else 2
    qkv = (spec.num_attention_heads + 2 * spec.num_key_value_heads) * spec.head_dim // tp
    mlp = 2 * spec.intermediate_size * max(1, spec.num_experts_per_tok or 1) // tp
    return element * (4 * spec.hidden_size + qkv + mlp)


def cudagraph_bytes(spec: ModelSpec, dtype: str = "auto", tp: int = 1, pp: int = 1, enforce_eager: bool = False) -> int:
    """Private memory pools of the captured decode graphs (0 with enforce_eager)."""
    if enforce_eager:
        return 0
    layers = math.ceil(spec.num_hidden_layers / pp)
    return layers * CUDAGRAPH_BYTES_PER_LAYER + CUDAGRAPH_MAX_CAPTURE_TOKENS * _activation_bytes_per_token(spec, dtype, tp)


def memory_budget(spec: ModelSpec, total_bytes: int, gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
                  tp: int = 1, pp: int = 1, dtype: str = "auto", quantization: str | None = None,
                  max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS, max_num_seqs: int = SMALL_GPU_SCHEDULER_LIMITS["server"][1], enforce_eager: bool = False,
                  kv_cache_memory: int | None = None) -> MemoryBudget:
    """The per-GPU budget, vLLM 0.33 style; `kv_cache_memory` fixes the KV share instead."""
    if not 0 < gpu_memory_utilization <= 1:
        raise UsageError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}.",
                         "Use e.g. --gpu-memory-utilization 0.9.")
    if total_bytes <= 0:
        raise UsageError(f"GPU memory must be positive, got {total_bytes} bytes.", "Use e.g. --gpu-mem 24GiB.")
    return MemoryBudget(
        total_bytes=int(total_bytes), gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=math.ceil(total_bytes * gpu_memory_utilization),
        weights_bytes=weights_bytes(spec, dtype, quantization) // (tp * pp),
        activation_bytes=activation_bytes(spec, max_num_batched_tokens, max_num_seqs, dtype, tp),
        non_torch_bytes=NON_TORCH_BYTES + (NCCL_BYTES if tp * pp > 1 else 0),
        cudagraph_bytes=cudagraph_bytes(spec, dtype, tp, pp, enforce_eager), kv_cache_memory_bytes=kv_cache_memory,
    )


def utilization_for(needed_bytes: float, total_bytes: float) -> float:
    """The gpu_memory_utilization whose budget holds `needed_bytes`, rounded up to a hundredth."""
    if total_bytes <= 0:
        return float("inf")
    return math.ceil(needed_bytes / total_bytes * 100 - 1e-9) / 100
