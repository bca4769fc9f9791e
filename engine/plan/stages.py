"""One plan's pipeline stages: each stage's memory budget on its own GPU and its KV cache under the release's
rules, and the stage that binds (vLLM gives every stage the fewest blocks any stage has)."""

from dataclasses import replace

from kvtool.engine.sizing import release_rules
from kvtool.engine.sizing.gguf_spec import engine_quantization
from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout, stage_partition
from kvtool.engine.sizing.memory_budget import MemoryBudget, memory_budget
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.weights import Stage, run_dtype


def binding_stage(spec, request, v0, batched, seqs) -> tuple[int, MemoryBudget, KVCacheSpec]:
    """Each pipeline stage's budget and KV cache on its own GPU. vLLM gives every stage the fewest blocks;
    0.14 - 0.16 check the whole model against the smallest stage's memory."""
    stages = []
    for index in range(request.pp):
        budget = stage_budget(spec, request, v0, batched, seqs, index)
        cache = kv_cache_spec(replace(spec, dtype=planned_run_dtype(spec, request)), request, v0, batched, index)
        blocks = cache.num_blocks(budget.kv_cache_bytes)
        stages.append((budget.kv_cache_bytes if cache.layout.rules.whole_model_check else blocks, index, budget, cache))
    return min(stages, key=lambda option: option[:2])[1:]


def kv_cache_spec(
    spec: ModelSpec, request, v0: bool, max_num_batched_tokens: int, stage: int | None = None
) -> KVCacheSpec:
    """The model's KV cache under the request's layout and its release's rules (on one pipeline stage)."""
    mixed = "full_attention" in spec.layer_types and "sliding_attention" in spec.layer_types
    rules = release_rules.kv_rules(request.release, v0, request.pp, mixed)
    layout = KVLayout(
        block_size=request.block_size,
        kv_cache_dtype=request.kv_cache_dtype,
        tp=request.tp,
        pp=request.pp,
        max_num_batched_tokens=max_num_batched_tokens,
        rules=rules,
        stage=stage,
        partition=request.pp_layer_partition,
    )
    return KVCacheSpec(spec, layout)


def cpu_engine_quantizes(spec, request) -> bool:
    """A KV budget given outright is the CPU engine's case, which keeps a GGUF file's weights quantized by
    default and then computes in float32 (gguf_spec.engine_quantization)."""
    if request.kv_cache_memory is None:
        return False
    return engine_quantization(spec.source, "cpu", request.dtype, request.quantization) == "gguf"


def planned_run_dtype(spec: ModelSpec, request) -> str:
    """The dtype the KV cache follows: the embedded engine's where the plan is for it (a KV budget given)."""
    return run_dtype(request.dtype, spec.dtype, "gguf" if cpu_engine_quantizes(spec, request) else None)


def stage_budget(spec, request, v0, batched, seqs, index: int = 0) -> MemoryBudget:
    """The budget of pipeline stage `index` on its GPU."""
    layers = stage_partition(spec.num_hidden_layers, request.pp, request.pp_layer_partition)[index]
    gpu = stage_gpu(request, index)
    return memory_budget(
        spec,
        gpu.total_bytes,
        request.engine_config(batched, seqs),
        _budget_rules(spec, request, v0, batched, seqs, gpu.arch),
        other_process_bytes=gpu.total_bytes - gpu.free_bytes if gpu.free_bytes is not None else 0,
        stage=Stage(layers, index == 0, index == request.pp - 1),
    )


def stage_gpu(request, index: int) -> GpuInfo:
    """The smallest GPU of pipeline stage `index` of a PlanRequest (ranks are stage-major: tp ranks of stage 0
    first)."""
    group = request.gpus[index * request.tp : (index + 1) * request.tp] or [request.gpu]
    return min(group, key=lambda gpu: gpu.total_bytes)


def _budget_rules(spec: ModelSpec, request, v0: bool, batched: int, seqs: int, arch: str | None):
    rules = release_rules.budget_rules(request.release, v0, arch, request.flashinfer_sampler)
    if request.cudagraphs_subtracted is not None:
        rules = replace(rules, subtract_cudagraphs=request.cudagraphs_subtracted and not v0)
    limits = request.limit_mm_per_prompt
    if spec.modalities and limits is not None:
        per_prompt = sum(limits.get(m, 0) for m in spec.modalities)
        fit = max(1, max(batched, spec.mm_tokens_per_item) // spec.mm_tokens_per_item) if per_prompt else 0
        rules = replace(rules, profile=replace(rules.profile, encoder_items=min(fit, seqs * per_prompt)))
    return rules
