"""EngineArgs: the engine settings as asked, by vLLM's engine-argument names, whether from flags, a workload
profile or a start-up log; None is "not given". `resolve` decides every one of them for the embedded engine on a
device (vLLM's `create_engine_config`); `kvtool plan` decides them as the release it predicts would. Also vLLM's
divisibility rules for the parallel sizes.
"""

from dataclasses import asdict, dataclass, fields

from kvtool.engine.sizing import context_length, defaults, messages
from kvtool.engine.sizing.engine_config import (
    CacheConfig,
    DeviceConfig,
    EngineConfig,
    ModelConfig,
    SchedulerConfig,
)
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import UsageError

POSITIVE = ("max_model_len", "block_size", "max_num_seqs", "max_num_batched_tokens", "kv_cache_memory", "threads")


@dataclass(frozen=True)
class EngineArgs:
    model: str | None = None  # a catalog name, a model folder or a GGUF file; None: defaults.DEFAULT_MODEL
    dtype: str = "auto"
    quantization: str | None = None
    load_format: str = "auto"
    seed: int = 0
    max_model_len: int | None = None  # context_length.AUTO_MAX_MODEL_LEN: the largest whose one request fits
    max_logprobs: int | None = None
    enable_prompt_embeds: bool | None = None
    enforce_eager: bool | None = None
    overflow: str | None = None  # kvtool's: prompt + max_tokens over max_model_len, "clamp" or "reject"
    limit_mm_per_prompt: dict[str, int] | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory: int | None = None  # vLLM's --kv-cache-memory-bytes
    kv_cache_dtype: str | None = None
    enable_prefix_caching: bool = True
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool = True
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    device: str = "auto"
    threads: int | None = None  # CPU threads; None: defaults.default_cpu_threads(), following what is free

    @classmethod
    def from_kwargs(cls, **kwargs) -> "EngineArgs":
        """EngineArgs from keyword arguments, naming any that it does not know."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise UsageError(
                f"Unknown engine argument(s): {', '.join(unknown)}.",
                fix=f"Known arguments: {', '.join(sorted(known))}.",
            )
        return cls(**kwargs)

    @property
    def model_name(self) -> str:
        return self.model or defaults.DEFAULT_MODEL

    def given(self) -> dict[str, object]:
        """The settings that differ from not given, by name."""
        unset = asdict(EngineArgs())
        return {name: value for name, value in asdict(self).items() if value != unset[name]}

    def check_for_engine(self) -> None:
        """The embedded engine's refusals, before anything loads: a UsageError names the setting and the way out."""
        _check_choice("dtype", self.dtype, defaults.DTYPES)
        _check_choice("load_format", self.load_format, defaults.LOAD_FORMATS)
        for name, choices in (
            ("kv_cache_dtype", defaults.ENGINE_KV_CACHE_DTYPES),
            ("overflow", defaults.OVERFLOW_POLICIES),
            ("quantization", defaults.ENGINE_QUANTIZATIONS),
        ):
            if getattr(self, name) is not None:
                _check_choice(name, getattr(self, name), choices)
        for name in POSITIVE:
            if getattr(self, name) is not None:
                _check_positive(name, getattr(self, name))
        self._check_ranges()

    def _check_ranges(self) -> None:
        if self.max_logprobs is not None and self.max_logprobs < -1:
            raise UsageError(
                f"max_logprobs must be -1 (the vocabulary) or at least 0, got {self.max_logprobs}.",
                fix="Pass a count such as 20 (vLLM's default), or -1.",
            )
        utilization = self.gpu_memory_utilization
        if utilization is not None and not 0.0 < utilization <= 1.0:
            raise UsageError(
                f"gpu_memory_utilization must be in (0, 1], got {utilization}.",
                fix=f"Pass a fraction such as {defaults.DEFAULT_GPU_MEMORY_UTILIZATION}.",
            )
        if (self.tensor_parallel_size or 1) != 1:
            raise UsageError(
                f"The embedded engine runs on one device; tensor_parallel_size={self.tensor_parallel_size}.",
                fix="Use tensor_parallel_size=1, or serve with --backend vllm for several GPUs.",
            )

    def resolve(self, spec: ModelSpec, scheduler_defaults: tuple[int, int]) -> EngineConfig:
        """Every setting decided for the embedded engine: the context length from the model, the scheduler limits
        from the device's vLLM 0.33 defaults (`scheduler_defaults`: max_num_batched_tokens, max_num_seqs)."""
        self.check_for_engine()
        max_model_len = context_length.resolve_max_model_len(
            self.max_model_len, KVCacheSpec(spec), above_model="refuse"
        )
        return EngineConfig(
            model_config=self._model_config(max_model_len),
            cache_config=self._cache_config(),
            scheduler_config=self._scheduler_config(max_model_len, *scheduler_defaults),
            device_config=DeviceConfig(self.device, self.threads),
        )

    def _model_config(self, max_model_len: int) -> ModelConfig:
        return ModelConfig(
            model=self.model_name,
            dtype=self.dtype,
            quantization=self.quantization,
            max_model_len=max_model_len,
            seed=self.seed,
            load_format=self.load_format,
            max_logprobs=defaults.MAX_LOGPROBS if self.max_logprobs is None else self.max_logprobs,
            enable_prompt_embeds=bool(self.enable_prompt_embeds),
            enforce_eager=bool(self.enforce_eager),
            overflow=self.overflow or defaults.DEFAULT_OVERFLOW,
        )

    def _cache_config(self) -> CacheConfig:
        return CacheConfig(
            block_size=self.block_size or defaults.DEFAULT_BLOCK_SIZE,
            gpu_memory_utilization=self.gpu_memory_utilization or defaults.DEFAULT_GPU_MEMORY_UTILIZATION,
            kv_cache_memory=self.kv_cache_memory,
            kv_cache_dtype=self.kv_cache_dtype or "auto",
            enable_prefix_caching=self.enable_prefix_caching,
        )

    def _scheduler_config(self, max_model_len: int, default_tokens: int, default_seqs: int) -> SchedulerConfig:
        """vLLM's rules between max_num_batched_tokens, max_num_seqs and max_model_len."""
        chunked, tokens = self.enable_chunked_prefill, self.max_num_batched_tokens
        if tokens is None:
            tokens = default_tokens if chunked else max(max_model_len, default_tokens)
        seqs = self.max_num_seqs or min(default_seqs, tokens)
        if not chunked and tokens < max_model_len:
            raise UsageError(
                messages.BATCHED_TOKENS_BELOW_MODEL_LEN.format(
                    max_num_batched_tokens=tokens, max_model_len=max_model_len
                )
            )
        if tokens < seqs:
            raise UsageError(
                messages.BATCHED_TOKENS_BELOW_NUM_SEQS.format(max_num_batched_tokens=tokens, max_num_seqs=seqs),
                fix=f"Raise max_num_batched_tokens to {seqs} or lower max_num_seqs.",
            )
        return SchedulerConfig(seqs, tokens, chunked)


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise UsageError(f"Unknown {name} {value!r}.", fix=f"Choose one of: {', '.join(choices)}.")


def _check_positive(name: str, value) -> None:
    if not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}.")


def check_parallel_sizes(spec: ModelSpec, tp: int = 1, pp: int = 1) -> None:
    """vLLM's divisibility rules for tensor and pipeline parallelism."""
    if tp < 1 or pp < 1:
        raise UsageError(f"parallel sizes must be >= 1 (got tp={tp}, pp={pp}).", "Use --tp 1 or more.")
    if spec.num_attention_heads % tp:
        raise UsageError(
            f"Total number of attention heads ({spec.num_attention_heads}) must be divisible by tensor "
            f"parallel size ({tp}).",
            f"Use a --tp that divides {spec.num_attention_heads}.",
        )
    kv = spec.num_key_value_heads
    if not spec.is_mla and (kv % tp if kv >= tp else tp % kv):
        raise UsageError(
            f"{kv} KV heads cannot be split over tensor parallel size {tp}.",
            f"Use a --tp that divides {kv} or a multiple of it.",
        )
    if pp > spec.num_hidden_layers:
        raise UsageError(
            f"pipeline parallel size {pp} exceeds the {spec.num_hidden_layers} layers.", "Use a smaller --pp."
        )
