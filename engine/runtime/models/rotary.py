"""The rotary-embedding table: cos and sin per position, with the config's RoPE scaling."""

import torch


def build_cos_sin_cache(config, max_positions: int) -> torch.Tensor:
    """[max_positions, head_dim] fp32 = cat(cos, sin), each head_dim / 2 wide, as `kernels` expects.

    Frequencies come from transformers' own RoPE functions (default, linear, llama3, yarn, ...), so
    the table equals what HF models compute.
    """
    inv_freq, attention_scaling = _inverse_frequencies(config)
    positions = torch.arange(max_positions, dtype=torch.float)
    freqs = positions[:, None] * inv_freq[None, :].float()
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1) * attention_scaling


def _inverse_frequencies(config) -> tuple[torch.Tensor, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    params = getattr(config, "rope_parameters", None) or {}
    rope_type = params.get("rope_type", "default")
    if rope_type == "default":
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim)), 1.0
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
