"""Each supported family gives HF transformers' greedy tokens, on the CPU kernels and on the references."""

import pytest
from engine_cases import hf_greedy, prompts_of
from families import WINDOW

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM

GREEDY_12 = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
FAMILIES = ["qwen3", "gemma2", "gemma3_text", "phi3", "qwen3_moe", "mixtral"]
PROMPT_LENGTHS = [1, 7, 20, 2 * WINDOW + 11]  # the last is longer than the sliding window


@pytest.mark.parametrize("kernels", ["cpu", "torch"])
@pytest.mark.parametrize("family", FAMILIES)
def test_family_matches_hf_greedy(family, kernels, tiny_family, monkeypatch):
    monkeypatch.setenv("KVTOOL_CPU_KERNELS", "1" if kernels == "cpu" else "0")
    folder, hf_model = tiny_family(family)
    llm = LLM(str(folder), dtype="float32", kv_cache_memory=1 << 20)
    assert llm.engine.model_runner.ops.backend == kernels
    prompts = prompts_of(PROMPT_LENGTHS)
    outputs = llm.generate(prompts, GREEDY_12, use_tqdm=False)
    for prompt, output in zip(prompts, outputs):
        assert output.outputs[0].token_ids == hf_greedy(hf_model, prompt, 12), f"prompt of {len(prompt)} tokens"
