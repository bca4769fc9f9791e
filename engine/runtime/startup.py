"""Start-up: the device, the EngineConfig the engine runs with (EngineArgs.resolve, once the model and the device
are known), and the KV-cache size check.

The KV arithmetic is `kvtool.engine.sizing.kv_cache`, the same functions `kvtool plan` uses, so that the
engine allocates exactly what plan predicts for the same budget.
"""

import dataclasses

from kvtool.engine.sizing import defaults, kv_cache
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.engine_config import EngineConfig
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


def create_engine_config(args: EngineArgs, spec: ModelSpec, device, quantization: str | None) -> EngineConfig:
    """The config with what was left to the model and the device decided: the one every part of the engine reads
    (vLLM's create_engine_config). `quantization` is what the loader does with the weights."""
    scheduler_defaults = defaults.default_scheduler_limits(*_device_memory(device))
    return dataclasses.replace(args, quantization=quantization).resolve(spec, scheduler_defaults)


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
    cache_config, max_model_len = config.cache_config, config.model_config.max_model_len
    layout = kv_cache.KVLayout(
        block_size=cache_config.block_size,
        kv_cache_dtype=cache_config.kv_cache_dtype,
        max_num_batched_tokens=config.scheduler_config.max_num_batched_tokens,
    )
    cache = kv_cache.KVCacheSpec(spec, layout)
    cache.check_fits(available_bytes, max_model_len)
    return cache.plan(available_bytes, max_model_len)
