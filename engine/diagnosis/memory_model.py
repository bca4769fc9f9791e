"""The plan memory model (`kvtool.engine.sizing.kv_cache`) seen from a log: what the KV budget the log
reports would hold at another length, dtype or parallelism, once the model is known."""

from dataclasses import dataclass
from pathlib import Path

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.sizing import kv_cache
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB
from kvtool.errors import UsageError

ASSUMED_MODEL_DTYPE = "bfloat16"


@dataclass(frozen=True)
class MemoryModel:
    spec: ModelSpec | None
    block_size: int = kv_cache.DEFAULT_BLOCK_SIZE
    kv_cache_dtype: str = "auto"
    tp: int = 1

    @classmethod
    def from_context(cls, context: LogContext, spec: ModelSpec | None = None) -> "MemoryModel":
        kv_cache_dtype = context.kv_cache_dtype if context.kv_cache_dtype in kv_cache.KV_CACHE_DTYPES else "auto"
        return cls(
            spec=spec or catalog_spec(context.model),
            block_size=context.block_size or kv_cache.DEFAULT_BLOCK_SIZE,
            kv_cache_dtype=kv_cache_dtype,
            tp=context.tensor_parallel_size or 1,
        )

    @property
    def model_dtype(self) -> str:
        return self.spec.dtype if self.spec else ASSUMED_MODEL_DTYPE

    def fp8_factor(self) -> int:
        """How many times more tokens the same memory holds with an fp8 KV cache (1 when already fp8)."""
        return kv_cache.kv_cache_dtype_bytes(self.kv_cache_dtype, self.model_dtype) // kv_cache.kv_cache_dtype_bytes(
            "fp8", self.model_dtype
        )

    def max_len_for(
        self, available_gib: float, kv_cache_dtype: str | None = None, tp: int | None = None, limit: int | None = None
    ) -> int | None:
        """Largest max_model_len one request of which fits `available_gib` (None without a model)."""
        if self.spec is None or available_gib <= 0:
            return None
        return kv_cache.estimate_max_model_len(
            int(available_gib * GiB),
            self.spec,
            self.block_size,
            kv_cache_dtype or self.kv_cache_dtype,
            tp or self.tp,
            limit=limit,
        )

    def needed_gib(self, max_model_len: int, kv_cache_dtype: str | None = None) -> float | None:
        """KV memory one request of max_model_len needs, plus the null block."""
        if self.spec is None:
            return None
        args = (self.block_size, kv_cache_dtype or self.kv_cache_dtype, self.tp)
        needed = kv_cache.request_kv_bytes(self.spec, max_model_len, *args) + kv_cache.block_bytes(self.spec, *args)
        return round(needed / GiB, 2)

    def kv_budget_gib(self, total_gib: float, gpu_memory_utilization: float) -> float | None:
        """What the plan memory model leaves for the KV cache on a GPU of `total_gib` (None without a model)."""
        if self.spec is None:
            return None
        from kvtool.engine.sizing.memory_budget import memory_budget

        budget = memory_budget(self.spec, int(total_gib * GiB), gpu_memory_utilization, tp=self.tp)
        return round(budget.kv_cache_bytes / GiB, 2)

    def kv_tokens(self, num_blocks: int) -> int:
        return num_blocks * self.block_size

    def round_down(self, length: int) -> tuple[int, int]:
        """(rounded down to a whole block, rounded down to a multiple of 1024 when that is not 0)."""
        to_block = length // self.block_size * self.block_size
        return to_block, (length // 1024 * 1024 or to_block)


def catalog_spec(model: str | None) -> ModelSpec | None:
    """The catalog's spec for a model named in a log; None when the name is unknown (no guessing)."""
    if not model:
        return None
    from kvtool.engine.sizing import catalog

    try:
        entry = catalog.find(model)
        return entry.spec() if entry else None
    except (UsageError, OSError, KeyError, ValueError):
        return None


def resolve_spec(model: str) -> ModelSpec:
    """`--model`: a catalog name or a local config.json / model folder / .gguf file."""
    from kvtool.engine.sizing import catalog
    from kvtool.engine.sizing.spec import resolve_model_spec

    if Path(model).expanduser().exists():
        return resolve_model_spec(model)
    if (spec := catalog_spec(model)) is not None:
        return spec
    close = catalog.suggestions(model)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    raise UsageError(
        f"unknown model '{model}'.", f"{hint}Give a catalog name, a config.json, a model folder or a .gguf file."
    )
