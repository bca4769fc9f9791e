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
from kvtool.engine.sizing.quantization import checkpoint_bytes, quant_facts, quantized_weight_bytes
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import UsageError

MiB = 1 << 20
NON_TORCH_BYTES = 256 * MiB  # CUDA context growth, cuBLAS workspaces
NCCL_BYTES = 512 * MiB  # communicator buffers, custom all-reduce (tp or pp > 1)
CUDAGRAPH_BYTES_PER_LAYER = 8 * MiB
CUDAGRAPH_MAX_CAPTURE_TOKENS = 512
SAMPLER_LOGITS_COPIES = 2  # fp32 logits and their softmax during the sampler warm-up
# V0's sampler inside the profile run (top_k = vocab - 1, top_p = 0.99 force the sort path of
# model_executor/layers/sampler.py _apply_top_k_top_p): per logit, the model-dtype logits (2), fp32 logits (4),
# sorted values (4), int64 sort indices (8), softmax of the sorted values (4), their cumsum (4), two bool
# masks (2) and the re-scattered logits (4) are alive at once.
V0_SAMPLER_BYTES_PER_LOGIT = 32


@dataclass(frozen=True)
class BudgetRules:
    """What differs between vLLM releases in the budget (the defaults are vLLM 0.33's)."""

    ceil_request: bool = True  # 0.14+: ceil(total x utilization)
    profile_tokens: int | None = None  # tokens of the profile forward when not max_num_batched_tokens (V0)
    logits_for_every_token: bool = False  # V1 0.7.0-0.7.2: logits over all batched tokens, no sampler
    sampler_bytes_per_logit: int = 4 * SAMPLER_LOGITS_COPIES  # V0: V0_SAMPLER_BYTES_PER_LOGIT
    charge_non_torch: bool = True  # 0.2.0-0.2.5 charge only the torch allocator peak
    charge_nccl: bool = False  # V0 0.3.1+ and V1 up to 0.10.2 take their baseline before NCCL init
    charge_other_processes: bool = False  # 0.2.6-0.3.0, 0.6.4 and V1 0.7-0.9.0 measure total - free
    subtract_cudagraphs: bool = True  # 0.20+
    encoder_items: int | None = None  # multimodal profile: items of the largest size (None: vLLM's choice)


V033_BUDGET = BudgetRules()


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
    encoder_bytes: int = 0  # the multimodal encoder's profiling run and its cached outputs
    other_process_bytes: int = 0  # memory of other processes, where the release charges it

    @property
    def non_kv_cache_bytes(self) -> int:
        return (
            self.weights_bytes
            + self.activation_bytes
            + self.non_torch_bytes
            + self.cudagraph_bytes
            + self.encoder_bytes
            + self.other_process_bytes
        )

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
    """All weights of the model, on all GPUs together: the checkpoint's own tensors when known, else the
    parameter groups at the quantization's bits (embeddings and encoder towers in the model dtype)."""
    if spec.source.endswith(".gguf") and Path(spec.source).is_file() and quantization in (None, "gguf"):
        return Path(spec.source).stat().st_size
    element = 4 if resolve_dtype(dtype, spec.dtype) == "float32" else 2
    method = quantization or (None if spec.quantization_config else spec.quantization)
    facts = quant_facts(spec.quantization_config, method)
    if spec.checkpoint_dtypes and (quantization is None or quantization == spec.quantization):
        return checkpoint_bytes(dict(spec.checkpoint_dtypes), element)
    if facts is None:
        return spec.num_parameters * element
    groups = dict(spec.parameter_groups) or {"other": spec.num_parameters}
    return quantized_weight_bytes(groups, facts, element)


def activation_bytes(
    spec: ModelSpec,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    dtype: str = "auto",
    tp: int = 1,
    rules: BudgetRules = V033_BUDGET,
) -> int:
    """Peak of the profiling forward pass: one batch of tokens, then the sampler's logits."""
    tokens = rules.profile_tokens or max_num_batched_tokens
    forward = tokens * _activation_bytes_per_token(spec, dtype, tp)
    if rules.logits_for_every_token:
        return forward + tokens * spec.vocab_size * _element(spec, dtype)
    return forward + min(max_num_seqs, tokens) * spec.vocab_size * rules.sampler_bytes_per_logit


def encoder_bytes(
    spec: ModelSpec, max_num_batched_tokens: int, dtype: str = "auto", tp: int = 1, items: int | None = None
) -> int:
    """The encoder profiling run (dummy items of the largest size) and the outputs it leaves in the
    encoder cache: a budget of max(max_num_batched_tokens, one item) text tokens."""
    if not spec.mm_tokens_per_item or not spec.encoder_hidden_size:
        return 0
    budget = max(max_num_batched_tokens, spec.mm_tokens_per_item)
    count = items if items is not None else max(1, budget // spec.mm_tokens_per_item)
    patches = count * spec.mm_tokens_per_item * 4  # a 2 x 2 patch merge is the common case
    per_patch = 4 * spec.encoder_hidden_size + 2 * spec.encoder_intermediate_size // tp
    cache = count * spec.mm_tokens_per_item * spec.hidden_size
    return (patches * per_patch + cache) * _element(spec, dtype)


def _element(spec: ModelSpec, dtype: str) -> int:
    return 4 if resolve_dtype(dtype, spec.dtype) == "float32" else 2


def _activation_bytes_per_token(spec: ModelSpec, dtype: str, tp: int) -> int:
    """Live tensors of one layer per token: residual stream copies, q/k/v, and the gated MLP's input."""
    qkv = (spec.num_attention_heads + 2 * spec.num_key_value_heads) * spec.head_dim // tp
    mlp = 2 * spec.intermediate_size * max(1, spec.num_experts_per_tok or 1) // tp
    return _element(spec, dtype) * (4 * spec.hidden_size + qkv + mlp)


def cudagraph_bytes(spec: ModelSpec, dtype: str = "auto", tp: int = 1, pp: int = 1, enforce_eager: bool = False) -> int:
    """Private memory pools of the captured decode graphs (0 with enforce_eager)."""
    if enforce_eager:
        return 0
    layers = math.ceil(spec.num_hidden_layers / pp)
    return layers * CUDAGRAPH_BYTES_PER_LAYER + CUDAGRAPH_MAX_CAPTURE_TOKENS * _activation_bytes_per_token(
        spec, dtype, tp
    )


def memory_budget(
    spec: ModelSpec,
    total_bytes: int,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "auto",
    quantization: str | None = None,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = SMALL_GPU_SCHEDULER_LIMITS["server"][1],
    enforce_eager: bool = False,
    kv_cache_memory: int | None = None,
    rules: BudgetRules = V033_BUDGET,
    other_process_bytes: int = 0,
) -> MemoryBudget:
    """The per-GPU budget as the release of `rules` measures it; `kv_cache_memory` fixes the KV share instead."""
    if not 0 < gpu_memory_utilization <= 1:
        raise UsageError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}.",
            "Use e.g. --gpu-memory-utilization 0.9.",
        )
    if total_bytes <= 0:
        raise UsageError(f"GPU memory must be positive, got {total_bytes} bytes.", "Use e.g. --gpu-mem 24GiB.")
    requested = total_bytes * gpu_memory_utilization
    non_torch = NON_TORCH_BYTES if rules.charge_non_torch else 0
    non_torch += NCCL_BYTES if tp * pp > 1 and rules.charge_nccl else 0
    return MemoryBudget(
        total_bytes=int(total_bytes),
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=math.ceil(requested) if rules.ceil_request else int(requested),
        weights_bytes=weights_bytes(spec, dtype, quantization) // (tp * pp),
        activation_bytes=activation_bytes(spec, max_num_batched_tokens, max_num_seqs, dtype, tp, rules),
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph_bytes(spec, dtype, tp, pp, enforce_eager or not rules.subtract_cudagraphs),
        kv_cache_memory_bytes=kv_cache_memory,
        encoder_bytes=encoder_bytes(
            spec, rules.profile_tokens or max_num_batched_tokens, dtype, tp, rules.encoder_items
        ),
        other_process_bytes=other_process_bytes if rules.charge_other_processes else 0,
    )


def utilization_for(needed_bytes: float, total_bytes: float) -> float:
    """The gpu_memory_utilization whose budget holds `needed_bytes`, rounded up to a hundredth."""
    if total_bytes <= 0:
        return float("inf")
    return math.ceil(needed_bytes / total_bytes * 100 - 1e-9) / 100
