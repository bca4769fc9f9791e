"""Tiny random-weight Llama and Qwen2 checkpoints (saved by HF transformers) for fast engine tests."""

import os
import sys

import pytest
import torch

# Test modules import the shared helpers in engine_cases.py (pytest runs with importlib mode).
sys.path.insert(0, os.path.dirname(__file__))

TINY = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def _save_tiny(folder, config):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # large weights, so that greedy paths differ from prompt to prompt
        for param in model.parameters():
            param.normal_(0.0, 0.5 if param.dim() > 1 else 0.3)
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """(folder, HF model) of a 2-layer Llama with GQA, llama3 RoPE scaling and tied embeddings."""
    from transformers import LlamaConfig

    folder = tmp_path_factory.mktemp("tiny-llama")
    config = LlamaConfig(**TINY, rope_parameters=LLAMA3_ROPE, tie_word_embeddings=True)
    return folder, _save_tiny(folder, config)


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory):
    """(folder, HF model) of a 2-layer Qwen2 (q/k/v bias, separate lm_head)."""
    from transformers import Qwen2Config

    folder = tmp_path_factory.mktemp("tiny-qwen2")
    return folder, _save_tiny(folder, Qwen2Config(**TINY, tie_word_embeddings=False))


@pytest.fixture(scope="session")
def tiny_llm(tiny_llama):
    """One fp32 engine on the tiny Llama, 1 MiB of KV cache (128 blocks)."""
    from kvtool.engine.runtime.llm import LLM

    return LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20)
