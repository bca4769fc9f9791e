"""The plan memory model (`kvtool.engine.sizing.kv_cache`) seen from a log: what the KV budget the log
reports would hold at another length, dtype or parallelism, once the model is known."""

from dataclasses import dataclass, replace
from pathlib import Path

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.discovery.models import resolve_offline, spec_from_path
from kvtool.engine.sizing import catalog
from kvtool.engine.sizing.defaults import DEFAULT_BLOCK_SIZE, KV_CACHE_DTYPES
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.kv_cache import KVCacheSpec, kv_cache_dtype_bytes
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.memory_budget import memory_budget
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB
from kvtool.errors import UsageError

ASSUMED_MODEL_DTYPE = "bfloat16"


@dataclass(frozen=True)
class MemoryModel:
    spec: ModelSpec | None
    layout: KVLayout = KVLayout()  # the log's block size, KV dtype and tensor parallel size

    @classmethod
    def from_context(cls, context: LogContext, spec: ModelSpec | None = None) -> "MemoryModel":
        layout = KVLayout(
            block_size=context.block_size or DEFAULT_BLOCK_SIZE,
            kv_cache_dtype=context.kv_cache_dtype if context.kv_cache_dtype in KV_CACHE_DTYPES else "auto",
            tp=context.tensor_parallel_size or 1,
            pp=context.pipeline_parallel_size or 1,
        )
        return cls(spec=spec or log_spec(context.model, context.served_model_name), layout=layout)

    @property
    def block_size(self) -> int:
        return self.layout.block_size

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def model_dtype(self) -> str:
        return self.spec.dtype if self.spec else ASSUMED_MODEL_DTYPE

    def fp8_factor(self) -> int:
        """How many times more tokens the same memory holds with an fp8 KV cache (1 when already fp8)."""
        own = kv_cache_dtype_bytes(self.layout.kv_cache_dtype, self.model_dtype)
        return own // kv_cache_dtype_bytes("fp8", self.model_dtype)

    def max_len_for(
        self, available_gib: float, kv_cache_dtype: str | None = None, tp: int | None = None, limit: int | None = None
    ) -> int | None:
        """Largest max_model_len one request of which fits `available_gib` (None without a model)."""
        if self.spec is None or available_gib <= 0:
            return None
        return self.cache(kv_cache_dtype, tp).estimate_max_model_len(int(available_gib * GiB), limit)

    def needed_gib(self, max_model_len: int, kv_cache_dtype: str | None = None) -> float | None:
        """KV memory one request of max_model_len needs, plus the null block."""
        if self.spec is None:
            return None
        cache = self.cache(kv_cache_dtype)
        return round((cache.request_bytes(max_model_len) + cache.block_bytes) / GiB, 2)

    def cache(self, kv_cache_dtype: str | None = None, tp: int | None = None) -> KVCacheSpec:
        """The model's KV cache under the log's layout, with another KV dtype or tensor parallel size."""
        layout = self.layout
        layout = replace(layout, kv_cache_dtype=kv_cache_dtype or layout.kv_cache_dtype, tp=tp or layout.tp)
        return KVCacheSpec(self.spec, layout)

    def kv_budget_gib(self, total_gib: float, gpu_memory_utilization: float) -> float | None:
        """What the plan memory model leaves for the KV cache on a GPU of `total_gib` (None without a model)."""
        if self.spec is None:
            return None
        config = EngineConfig.of(gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=self.tp)
        budget = memory_budget(self.spec, int(total_gib * GiB), config)
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
    try:
        entry = catalog.find(model)
        return entry.spec() if entry else None
    except (UsageError, OSError, KeyError, ValueError):
        return None


def log_spec(*names: str | None) -> ModelSpec | None:
    """The model a log names (its path or its served name), found without the network as `plan --from-log` finds
    it: a local path, the catalog (also the last part of a path), the Hugging Face cache; None when none is."""
    for name in filter(None, names):
        try:
            if (spec := resolve_offline(name)) is not None:
                return spec
        except (UsageError, OSError, KeyError, ValueError, RuntimeError):  # RuntimeError: "~nobody/x"
            continue
    return None


def resolve_spec(model: str) -> ModelSpec:
    """`--model`: a catalog name or a local config.json / model folder / .gguf file."""
    path = Path(model).expanduser()
    if path.exists():
        return spec_from_path(path)
    if (spec := catalog_spec(model)) is not None:
        return spec
    close = catalog.suggestions(model)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    raise UsageError(
        f"unknown model '{model}'.", f"{hint}Give a catalog name, a config.json, a model folder or a .gguf file."
    )
