"""EngineConfig: the engine's settings once decided, grouped as vLLM's VllmConfig groups them (model, cache,
scheduler, parallel, device). `EngineArgs.resolve` makes the embedded engine's; the planner makes the one a
vLLM release would run with. The engine's parts, the server and the memory model each read the group they need.

The defaults are vLLM 0.33's, where a memory estimate needs a value that nobody asked for.
"""

from dataclasses import dataclass, field, fields, replace

from kvtool.engine.sizing import defaults


@dataclass(frozen=True)
class ModelConfig:
    model: str = defaults.DEFAULT_MODEL
    dtype: str = "auto"  # as asked; the weights' dtype follows from it and the checkpoint (weights.resolve_dtype)
    quantization: str | None = None
    max_model_len: int | None = None  # None only while a planner sizes memory before it fits the length
    seed: int = 0
    load_format: str = "auto"
    max_logprobs: int = defaults.MAX_LOGPROBS  # the most (prompt) logprobs a request may ask for; -1: the vocabulary
    enable_prompt_embeds: bool = False  # requests may give embeddings for prompt positions (vLLM's flag)
    enforce_eager: bool = False  # no CUDA graphs
    overflow: str = defaults.DEFAULT_OVERFLOW  # prompt + max_tokens over max_model_len: "clamp" or "reject"


@dataclass(frozen=True)
class CacheConfig:
    block_size: int = defaults.DEFAULT_BLOCK_SIZE
    gpu_memory_utilization: float = defaults.DEFAULT_GPU_MEMORY_UTILIZATION
    kv_cache_memory: int | None = None  # bytes for the KV cache, given outright (the CPU engine's budget)
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool = True


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = defaults.SMALL_GPU_SCHEDULER_LIMITS["server"][1]
    max_num_batched_tokens: int = defaults.DEFAULT_MAX_NUM_BATCHED_TOKENS
    enable_chunked_prefill: bool = True


@dataclass(frozen=True)
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1


@dataclass(frozen=True)
class DeviceConfig:
    device: str = "auto"
    threads: int | None = None  # CPU threads for torch and the C kernels; None: they follow what is free


@dataclass(frozen=True)
class EngineConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    device_config: DeviceConfig = field(default_factory=DeviceConfig)

    @classmethod
    def of(cls, **settings) -> "EngineConfig":
        """An EngineConfig from settings by vLLM's engine-argument names, each put in its group; the rest are the
        groups' defaults."""
        groups = {group.name: group.default_factory for group in fields(cls)}
        known = {name for kind in groups.values() for name in _names(kind)}
        if set(settings) - known:
            raise TypeError(f"Not engine settings: {', '.join(sorted(set(settings) - known))}")
        return cls(
            **{name: kind(**{k: v for k, v in settings.items() if k in _names(kind)}) for name, kind in groups.items()}
        )

    def with_max_model_len(self, max_model_len: int) -> "EngineConfig":
        return replace(self, model_config=replace(self.model_config, max_model_len=max_model_len))


def _names(kind) -> set[str]:
    return {f.name for f in fields(kind)}
