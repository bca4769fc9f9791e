"""Engine arguments checked against the model: `--max-model-len` (a number, `8k` or `auto`) and the
parallel sizes (vLLM's divisibility rules)."""

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import parse_human_int
from kvtool.errors import UsageError

AUTO_MAX_MODEL_LEN = -1  # vLLM's `--max-model-len -1` (or `auto`): the largest length whose one request fits


def parse_max_model_len(value: str | int) -> int:
    """A context length as vLLM reads it: 20000, 8k (8000), 8K (8192), or auto / -1 (AUTO_MAX_MODEL_LEN)."""
    if str(value).strip().lower() in ("auto", str(AUTO_MAX_MODEL_LEN)):
        return AUTO_MAX_MODEL_LEN
    length = parse_human_int(value, "max_model_len")
    if length < 1:
        raise UsageError(f"max_model_len must be positive, got {length}.", "Give e.g. 8192, 8k or auto.")
    return length


def resolve_max_model_len(requested: str | int | None, cache: KVCacheSpec, available_bytes: int | None = None) -> int:
    """None -> the config's derived length; `auto` / -1 -> the largest that fits; `8k` / `8K` / 8192 as given."""
    if requested is None:
        return cache.model.derived_max_model_len
    length = parse_max_model_len(requested)
    if length != AUTO_MAX_MODEL_LEN:
        return length
    if available_bytes is None:
        raise UsageError("max_model_len 'auto' needs a KV-cache budget.", "Give a GPU or a memory size, or a number.")
    length = cache.estimate_max_model_len(available_bytes)
    if length < 1:
        raise UsageError(messages.CANNOT_AUTO_FIT)
    return length


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
