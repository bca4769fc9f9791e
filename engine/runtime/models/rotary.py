"""Rotary-embedding tables, with every RoPE scaling type the supported families use.

`default`, `linear`, `dynamic`, `llama3`, `yarn` and `longrope` frequencies come from transformers'
own RoPE functions, so the tables equal what the HF models compute. Models whose config keys RoPE
parameters by layer type (Gemma 3: a separate base for local layers) get one table per layer type.
"""

import torch

from kvtool.engine.sizing import hf_config

SUPPORTED_ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")


def head_dim(config) -> int:
    """The attention head size, read as `kvtool plan` reads it."""
    return hf_config.head_dim(config.to_dict(), config.hidden_size, config.num_attention_heads)


def rotary_dim(config) -> int:
    """Dimensions each head rotates (Phi's partial_rotary_factor rotates only the first part)."""
    factor = rope_parameters(config).get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    return int(head_dim(config) * (factor or 1.0))


def rope_parameters(config, layer_type: str | None = None) -> dict:
    params = getattr(config, "rope_parameters", None) or {}
    return params.get(layer_type) or {} if layer_type in params else params


def build_cos_sin_cache(config, max_positions: int, layer_type: str | None = None) -> torch.Tensor:
    """[max_positions, rotary_dim] fp32 = cat(cos, sin), each rotary_dim / 2 wide, as `kernels` expects.

    Longrope switches from its short to its long factors at original_max_position_embeddings, per
    position: the tokens past that length are rotated as HF rotates a sequence that long.
    """
    params = rope_parameters(config, layer_type)
    rope_type = params.get("rope_type", "default")
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(f"RoPE type {rope_type!r} is not supported; supported: {', '.join(SUPPORTED_ROPE_TYPES)}")
    positions = torch.arange(max_positions, dtype=torch.float)
    table = _table(positions, *_inverse_frequencies(config, rope_type, layer_type))
    original = params.get("original_max_position_embeddings") or getattr(config, "original_max_position_embeddings", 0)
    if rope_type == "longrope" and max_positions > original:
        long = _table(positions, *_inverse_frequencies(config, rope_type, layer_type, seq_len=original + 1))
        table[original:] = long[original:]
    return table


def _table(positions, inv_freq, attention_scaling):
    freqs = positions[:, None] * inv_freq[None, :].float()
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1) * attention_scaling


def _inverse_frequencies(config, rope_type, layer_type, seq_len=None) -> tuple[torch.Tensor, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kwargs = {"layer_type": layer_type} if layer_type is not None else {}
    if rope_type == "default":
        params = rope_parameters(config, layer_type)
        dim = rotary_dim(config)
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), 1.0
    if seq_len is not None:
        kwargs["seq_len"] = seq_len
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", **kwargs)
