"""Start-up decisions: device, context length, scheduler limits, and the KV-cache size check.

The KV arithmetic is `kvtool.engine.sizing.kv_cache`, the same functions `kvtool plan` uses, so that the
engine allocates exactly what plan predicts for the same budget.
"""

import dataclasses

from kvtool.engine.runtime.config import EngineConfig
from kvtool.engine.sizing import defaults, kv_cache, messages
from kvtool.engine.sizing.spec import ModelSpec, spec_from_hf_config
from kvtool.errors import UsageError


def resolve_device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"device {name!r} was asked for, but no CUDA device is visible.", fix="Use device='cpu' or 'auto'."
        )
    return device


def engine_spec(hf_config, name: str, dtype) -> ModelSpec:
    """The model's ModelSpec, with the dtype the engine actually runs in (which "auto" KV follows)."""
    spec = spec_from_hf_config(hf_config.to_dict(), name)
    return dataclasses.replace(spec, dtype=str(dtype).removeprefix("torch."))


def resolve_max_model_len(config: EngineConfig, spec: ModelSpec) -> int:
    derived = spec.derived_max_model_len
    if config.max_model_len is None:
        return derived
    if config.max_model_len > derived:
        raise UsageError(
            messages.MAX_MODEL_LEN_OVER_DERIVED.format(max_model_len=config.max_model_len, derived=derived),
            fix=f"Use max_model_len <= {derived}.",
        )
    return config.max_model_len


def resolve_scheduler_limits(config: EngineConfig, max_model_len: int, device) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs), with vLLM's rules between them and max_model_len."""
    default_tokens, default_seqs = defaults.default_scheduler_limits(*_device_memory(device))
    tokens = config.max_num_batched_tokens
    if tokens is None:
        tokens = default_tokens if config.enable_chunked_prefill else max(max_model_len, default_tokens)
    seqs = config.max_num_seqs or min(default_seqs, tokens)
    if not config.enable_chunked_prefill and tokens < max_model_len:
        raise UsageError(
            messages.BATCHED_TOKENS_BELOW_MODEL_LEN.format(max_num_batched_tokens=tokens, max_model_len=max_model_len)
        )
    if tokens < seqs:
        raise UsageError(
            messages.BATCHED_TOKENS_BELOW_NUM_SEQS.format(max_num_batched_tokens=tokens, max_num_seqs=seqs),
            fix=f"Raise max_num_batched_tokens to {seqs} or lower max_num_seqs.",
        )
    return tokens, seqs


def resolve_config(config: EngineConfig, spec: ModelSpec, device, quantization: str | None) -> EngineConfig:
    """The config with what was left to the model and the device decided: the one every part of the engine reads."""
    max_model_len = resolve_max_model_len(config, spec)
    batched_tokens, max_seqs = resolve_scheduler_limits(config, max_model_len, device)
    return dataclasses.replace(
        config,
        max_model_len=max_model_len,
        max_num_batched_tokens=batched_tokens,
        max_num_seqs=max_seqs,
        quantization=quantization,
    )


def _device_memory(device) -> tuple[int | None, str]:
    """(total bytes, name) of a CUDA device; (None, "CPU") on the CPU."""
    import torch

    if device.type != "cuda":
        return None, "CPU"
    properties = torch.cuda.get_device_properties(device)
    return properties.total_memory, properties.name


def plan_kv_cache(config: EngineConfig, spec: ModelSpec, available_bytes: int) -> kv_cache.KVCachePlan:
    """The start-up check of the resolved config (vLLM's message when one max_model_len request does not fit),
    then the plan."""
    layout = kv_cache.KVLayout(
        block_size=config.block_size,
        kv_cache_dtype=config.kv_cache_dtype,
        max_num_batched_tokens=config.max_num_batched_tokens,
    )
    cache = kv_cache.KVCacheSpec(spec, layout)
    cache.check_fits(available_bytes, config.max_model_len)
    return cache.plan(available_bytes, config.max_model_len)
