"""The RoPE tables equal what HF transformers' rotary embeddings compute, for every scaling type."""

import pytest
import torch

from kvtool.engine.runtime.models.rotary import build_cos_sin_cache

BASE = dict(
    vocab_size=64,
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=1,
    intermediate_size=32,
    max_position_embeddings=256,
)
LLAMA_SCALINGS = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    "llama3": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64},
}


def hf_table(rotary, positions, **kwargs):
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = rotary(x, torch.tensor([positions]), **kwargs)
    half = cos.shape[-1] // 2
    return torch.cat((cos[0, :, :half], sin[0, :, :half]), dim=-1)


@pytest.mark.parametrize("kind", list(LLAMA_SCALINGS))
def test_llama_scalings_match_hf(kind):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(**BASE, rope_parameters=LLAMA_SCALINGS[kind])
    positions = list(range(0, 256, 7))
    expected = hf_table(LlamaRotaryEmbedding(config), positions)
    torch.testing.assert_close(build_cos_sin_cache(config, 256)[positions], expected, atol=1e-5, rtol=1e-5)


def test_longrope_uses_short_factors_then_long_ones_past_the_original_length():
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    config = Phi3Config(
        **BASE,
        original_max_position_embeddings=64,
        rope_scaling={
            "rope_type": "longrope",
            "short_factor": [1.0 + i / 8 for i in range(8)],
            "long_factor": [2.0 + i for i in range(8)],
        },
    )
    table = build_cos_sin_cache(config, 256)
    short, long = list(range(64)), list(range(64, 256))
    rotary = Phi3RotaryEmbedding(config)
    torch.testing.assert_close(table[short], hf_table(rotary, short), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(table[long], hf_table(rotary, long), atol=1e-5, rtol=1e-5)


def test_gemma3_has_one_table_per_layer_type():
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    config = Gemma3TextConfig(
        **{**BASE, "num_hidden_layers": 2},
        head_dim=16,
        rope_local_base_freq=100.0,
        layer_types=["sliding_attention", "full_attention"],
        rope_scaling={"rope_type": "linear", "factor": 8.0},
    )
    rotary, positions = Gemma3RotaryEmbedding(config), list(range(0, 256, 5))
    for kind in ("sliding_attention", "full_attention"):
        expected = hf_table(rotary, positions, layer_type=kind)
        torch.testing.assert_close(build_cos_sin_cache(config, 256, kind)[positions], expected, atol=1e-5, rtol=1e-5)
