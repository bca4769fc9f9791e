"""Greedy outputs equal HF transformers `generate` token for token."""

import pytest
import torch
from engine_cases import hf_greedy, prompts_of

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM

GREEDY_64 = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_qwen2"])
def test_tiny_models_match_hf(fixture, request):
    folder, hf_model = request.getfixturevalue(fixture)
    llm = LLM(str(folder), dtype="float32", kv_cache_memory=1 << 20)
    prompts = prompts_of([1, 7, 40, 100])
    outputs = llm.generate(prompts, GREEDY_64, use_tqdm=False)
    for prompt, output in zip(prompts, outputs):
        assert output.outputs[0].token_ids == hf_greedy(hf_model, prompt, 64)


@pytest.mark.slow
def test_smollm2_matches_hf(smollm2_llm, smollm2_dir):
    from transformers import AutoModelForCausalLM

    hf_model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    texts = [
        "The capital of France is",
        "Write a haiku about the sea.",
        "def fibonacci(n):",
        "Once upon a time, in a small village by the mountains,",
    ]
    outputs = smollm2_llm.generate(texts, GREEDY_64, use_tqdm=False)
    tokenizer = smollm2_llm.tokenizer
    for text, output in zip(texts, outputs):
        assert output.outputs[0].token_ids == hf_greedy(hf_model, tokenizer.encode(text), 64)
        assert output.outputs[0].text == tokenizer.decode(output.outputs[0].token_ids, skip_special_tokens=True)
