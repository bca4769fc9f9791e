"""max_model_len, decided in one place: the forms a flag takes (20000, 8k, 8K, auto), the model's derived length
when none is asked for, the auto-fit to a KV budget, and what a length above the model's becomes.

vLLM refuses a length above the derived one (without VLLM_ALLOW_LONG_MAX_MODEL_LEN). kvtool does the same for a
length the user asked for (a flag, the offline engine's argument), lowers a workload profile's to the model's with
a note (a profile is written for many models), and lets `plan` price it and report that it would not start.
Callers reach the decision as `context_length.resolve_max_model_len`, so that a test can follow one value from it
to every consumer.
"""

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import parse_human_int
from kvtool.errors import UsageError

AUTO_MAX_MODEL_LEN = -1  # vLLM's `--max-model-len -1` (or `auto`): the largest length whose one request fits
# What a length above the model's derived one becomes: an error, the model's length, or kept (plan prices it).
ABOVE_MODEL_POLICIES = ("refuse", "lower", "keep")


def parse_max_model_len(value: str | int) -> int:
    """A context length as vLLM reads it: 20000, 8k (8000), 8K (8192), or auto / -1 (AUTO_MAX_MODEL_LEN)."""
    if str(value).strip().lower() in ("auto", str(AUTO_MAX_MODEL_LEN)):
        return AUTO_MAX_MODEL_LEN
    length = parse_human_int(value, "max_model_len")
    if length < 1:
        raise UsageError(f"max_model_len must be positive, got {length}.", "Give e.g. 8192, 8k or auto.")
    return length


def resolve_max_model_len(
    requested: str | int | None,
    cache: KVCacheSpec,
    available_bytes: int | None = None,
    above_model: str = "keep",
    fix: str | None = None,
) -> int:
    """None -> the model's derived length; `auto` / -1 -> the largest that fits `available_bytes`; `8k` / `8K` /
    8192 as given, then held to the model's length by `above_model` (`fix` says how to refuse)."""
    if requested is None:
        return cache.model.derived_max_model_len
    length = parse_max_model_len(requested)
    if length == AUTO_MAX_MODEL_LEN:
        return _auto_fit(cache, available_bytes)
    derived = cache.model.derived_max_model_len
    if length <= derived or above_model == "keep":
        return length
    if above_model == "lower":
        return derived
    raise UsageError(
        messages.MAX_MODEL_LEN_OVER_DERIVED.format(max_model_len=length, derived=derived),
        fix or f"Use max_model_len <= {derived}.",
    )


def _auto_fit(cache: KVCacheSpec, available_bytes: int | None) -> int:
    if available_bytes is None:
        raise UsageError("max_model_len 'auto' needs a KV-cache budget.", "Give a GPU or a memory size, or a number.")
    length = cache.estimate_max_model_len(available_bytes)
    if length < 1:
        raise UsageError(messages.CANNOT_AUTO_FIT)
    return length


def within_model(length: int, spec: ModelSpec) -> bool:
    """Whether a length is one vLLM starts with for this model (no longer than its derived length)."""
    return length <= spec.derived_max_model_len


def longest_within_model(length: int, spec: ModelSpec) -> int:
    return min(length, spec.derived_max_model_len)
