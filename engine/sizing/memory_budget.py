"""Where a GPU's memory goes before the KV cache (vLLM's profiling, estimated without a GPU).

KV budget = ceil(total x gpu_memory_utilization) - weights - activation peak - non-torch memory - CUDA graphs
(- the encoder's share of the profile peak - other processes, where the release charges them). Weights follow
from the parameter count (weights.py); the activation peak from the profile run (profile_run.py); the graph
estimate follows vLLM's own method (cudagraphs.py); non-torch memory and NCCL buffers are per release. Each
release's rules are in BudgetRules, set by vllm_startup.budget_rules.
"""

import math
from dataclasses import dataclass, field

from kvtool.engine.sizing.cudagraphs import CaptureRules, cudagraph_bytes
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.profile_run import ProfileRules, activation_bytes, encoder_bytes
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.weights import Stage, model_quant_facts, stage_weights_bytes
from kvtool.errors import UsageError

MiB = 1 << 20
# What the profile measures outside torch's allocator on one GPU once the baseline is taken after the CUDA
# context exists: lazily loaded kernels and the like. Printed "non-torch memory" on single-GPU logs: 0.02 GiB
# (V1 0.10.2, three logs), 0.03 - 0.09 GiB (V0 0.7 - 0.8, seven logs).
V1_NON_TORCH_BYTES = 20 * MiB
V0_NON_TORCH_BYTES = 50 * MiB
# Where the release measures total - free, its own CUDA context is charged too (about 0.3 - 0.5 GiB).
CONTEXT_BYTES = 450 * MiB
# The extensible KV cache (0.34, v1/worker/extensible_kv_cache.py measure_kv_cache_bytes) keeps free a margin of
# max(KV_CACHE_MARGIN_FLOOR_BYTES, KV_CACHE_MARGIN_FRACTION x the transient peak) of the device.
EXTENSIBLE_MARGIN_FLOOR = 1 << 30
EXTENSIBLE_MARGIN_FRACTION = 0.75
# NCCL communicator buffers per peer rank, where charged. Fitted, not derived: 0.117 GiB at tp 2 on A100 (two
# logs against their tp 1 runs), 2.28 GiB at tp 8 on H100 (two logs of different models, after their sampler).
NCCL_BYTES_PER_PEER = {"ampere": 120 * MiB, "hopper": 333 * MiB}


# How far each estimate strays from what vLLM prints, as a share of it, on the logs in docs/plan.md: the
# activation peak (0.17 and 0.60 GiB on two runs with the same flags), the graph estimate (about 40 %).
ESTIMATE_SPREAD = {"activation_bytes": 0.3, "non_torch_bytes": 0.5, "cudagraph_bytes": 0.4, "encoder_bytes": 0.5}


@dataclass(frozen=True)
class BudgetRules:
    """What differs between vLLM releases in the budget (the defaults are vLLM 0.33's)."""

    ceil_request: bool = True  # 0.14+: ceil(total x utilization)
    profile: ProfileRules = field(default_factory=ProfileRules)
    non_torch_bytes: int = V1_NON_TORCH_BYTES  # 0 in 0.2.0-0.2.5 (only the torch allocator peak)
    nccl_bytes_per_peer: int = 0  # V0 0.3.1+ and V1 up to 0.10.2 take their baseline before NCCL init
    charge_other_processes: bool = False  # 0.2.6-0.3.0, 0.6.4 and V1 0.7-0.9.0 measure total - free
    extensible: bool = False  # 0.34: the KV cache sized after warmup, a margin of the device kept free
    subtract_cudagraphs: bool = True  # 0.20+
    capture: CaptureRules = field(default_factory=CaptureRules)
    mxfp4_align: tuple[int, int] = (64, 1)  # MXFP4 MoE padding (intermediate per rank, hidden) of the kernel

    @property
    def encoder_items(self) -> int | None:
        return self.profile.encoder_items


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
    encoder_bytes: int = 0  # what the multimodal encoder's profiling adds to the peak
    other_process_bytes: int = 0  # memory of other processes, where the release charges it
    kv_headroom_bytes: int = 0  # 0.34: the margin the extensible KV cache keeps beyond what utilization leaves

    @property
    def non_kv_cache_bytes(self) -> int:
        return (
            self.weights_bytes
            + self.activation_bytes
            + self.non_torch_bytes
            + self.cudagraph_bytes
            + self.encoder_bytes
            + self.other_process_bytes
            + self.kv_headroom_bytes
        )

    @property
    def kv_cache_bytes(self) -> int:
        """What is left for the KV cache (negative when the rest already overflows)."""
        if self.kv_cache_memory_bytes is not None:
            return self.kv_cache_memory_bytes
        return self.requested_bytes - self.non_kv_cache_bytes


def memory_budget(
    spec: ModelSpec,
    total_bytes: int,
    config: EngineConfig = EngineConfig(),
    rules: BudgetRules = V033_BUDGET,
    other_process_bytes: int = 0,
    stage: Stage | None = None,
) -> MemoryBudget:
    """One GPU's budget under `config` as the release of `rules` measures it (the GPU of `stage` under pipeline
    parallelism: by default a stage of ceil(layers / pp) layers holding both ends); a `kv_cache_memory` fixes the
    KV share."""
    model, cache, scheduler = config.model_config, config.cache_config, config.scheduler_config
    gpu_memory_utilization, kv_cache_memory = cache.gpu_memory_utilization, cache.kv_cache_memory
    dtype, quantization, enforce_eager = model.dtype, model.quantization, model.enforce_eager
    max_num_batched_tokens, max_num_seqs = scheduler.max_num_batched_tokens, scheduler.max_num_seqs
    tp, pp = config.parallel_config.tensor_parallel_size, config.parallel_config.pipeline_parallel_size
    _check_inputs(gpu_memory_utilization, total_bytes)
    stage = stage or Stage(math.ceil(spec.num_hidden_layers / pp))
    requested = total_bytes * gpu_memory_utilization
    peak = activation_bytes(spec, max_num_batched_tokens, max_num_seqs, dtype, tp, rules.profile, stage.last)
    no_graphs = enforce_eager or not rules.subtract_cudagraphs
    graphs = 0 if no_graphs else _cudagraphs(spec, rules, max_num_seqs, max_num_batched_tokens, stage, quantization)
    requested = math.ceil(requested) if rules.ceil_request else int(requested)
    return MemoryBudget(
        total_bytes=int(total_bytes),
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        weights_bytes=stage_weights_bytes(spec, dtype, quantization, tp, stage, rules.mxfp4_align),
        activation_bytes=peak,
        non_torch_bytes=rules.non_torch_bytes + rules.nccl_bytes_per_peer * (tp * pp - 1),
        cudagraph_bytes=graphs,
        kv_cache_memory_bytes=kv_cache_memory,
        encoder_bytes=encoder_bytes(spec, max_num_batched_tokens, peak, dtype, tp, rules.encoder_items)
        if stage.first
        else 0,
        other_process_bytes=other_process_bytes if rules.charge_other_processes else 0,
        kv_headroom_bytes=_headroom(rules, total_bytes - requested, other_process_bytes, peak),
    )


def _headroom(rules: BudgetRules, unrequested: int, other_process_bytes: int, peak: int) -> int:
    """0.34 caps the KV cache at min(requested - used, free - margin): the margin, and the memory other
    processes hold, cost the KV cache only beyond what the utilization leaves unrequested."""
    if not rules.extensible:
        return 0
    margin = max(EXTENSIBLE_MARGIN_FLOOR, int(EXTENSIBLE_MARGIN_FRACTION * peak))
    return max(0, margin + other_process_bytes - unrequested)


def _check_inputs(gpu_memory_utilization: float, total_bytes: int) -> None:
    if not 0 < gpu_memory_utilization <= 1:
        raise UsageError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}.",
            "Use e.g. --gpu-memory-utilization 0.9.",
        )
    if total_bytes <= 0:
        raise UsageError(f"GPU memory must be positive, got {total_bytes} bytes.", "Use e.g. --gpu-mem 24GiB.")


def _cudagraphs(spec, rules, max_num_seqs, max_num_batched_tokens, stage, quantization) -> int:
    facts = model_quant_facts(spec, quantization)
    weight_only = facts is not None and facts.weight_only
    return cudagraph_bytes(spec, rules.capture, max_num_seqs, max_num_batched_tokens, stage.layers, weight_only)


def utilization_for(needed_bytes: float, total_bytes: float) -> float:
    """The gpu_memory_utilization whose budget holds `needed_bytes`, rounded up to a hundredth."""
    if total_bytes <= 0:
        return float("inf")
    return math.ceil(needed_bytes / total_bytes * 100 - 1e-9) / 100
