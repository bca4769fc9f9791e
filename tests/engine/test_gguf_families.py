"""A Qwen3 GGUF (llama.cpp tensor names, written with the `gguf` package) loads and gives the greedy
tokens of the HF model it was written from."""

import torch
from engine_cases import prompts_of
from families import save_tiny_tokenizer, write_gguf
from test_families import hf_greedy

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM


def test_qwen3_gguf_matches_hf(tmp_path, monkeypatch):
    monkeypatch.setenv("KVTOOL_CACHE_DIR", str(tmp_path / "cache"))  # the converted copy goes there
    # head_dim 128, as every Qwen3 has: transformers' GGUF reader does not read attention.key_length
    from families import TINY
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    hf_model = AutoModelForCausalLM.from_config(
        Qwen3Config(**TINY, head_dim=128, tie_word_embeddings=False), dtype=torch.float32
    ).eval()
    save_tiny_tokenizer(tmp_path)
    write_gguf(tmp_path / "tiny-qwen3.gguf", hf_model, tmp_path, "qwen3")
    llm = LLM(str(tmp_path / "tiny-qwen3.gguf"), dtype="float32", kv_cache_memory=4 << 20)
    assert llm.engine.spec.num_hidden_layers == 2
    prompts = prompts_of([5, 30])
    outputs = llm.generate(prompts, SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True), use_tqdm=False)
    for prompt, output in zip(prompts, outputs):
        assert output.outputs[0].token_ids == hf_greedy(hf_model, prompt, 12)
