"""A decode step in one C call against the Python layers: the same kernels in the same order give the
same numbers, bit for bit, with dense (column panels on AVX2, plain weights on AVX-512) or quantized GGUF
linear layers; models and steps it does not cover run the layers."""

import dataclasses
import sys

import pytest
import torch

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM
from kvtool.kernels import cpu_linear, cpu_ops
from kvtool.kernels.cpu_build import compiled_library
from kvtool.kernels.cpu_linear import can_pack

needs_dense_steps = pytest.mark.skipif(
    not (cpu_ops.panel_linear_rows(torch.float32) or cpu_ops.small_linear_wins()),
    reason="dense steps fuse where weights are kept in panels or plain for small_linear",
)
needs_bf16_packing = pytest.mark.skipif(
    not can_pack(torch.device("cpu"), torch.bfloat16), reason="oneDNN packs no bf16 weights on this CPU"
)
needs_kernels = pytest.mark.skipif(compiled_library() is None, reason="needs the compiled CPU kernels")


def dense_rows(dtype: torch.dtype) -> int:
    """Up to how many rows a dense step fuses here: the small-rows kernel's limit (any where panels are the only copy)."""
    return cpu_linear.kernel_rows(dtype)


@dataclasses.dataclass
class BothWays:
    """The first all-decode step's hidden states and logits, fused and through the layers."""

    fused: torch.Tensor
    layers: torch.Tensor
    fused_logits: torch.Tensor
    layers_logits: torch.Tensor


def first_decode_both_ways(llm, prompts) -> BothWays:
    """The first all-decode step, fused and through the layers, each from the same KV cache state."""
    causal_lm = llm.engine.model_runner.model
    model, seen = causal_lm.model, {}
    fused, decode_logits = model.fused_decode, causal_lm.decode_logits

    def from_the_same_cache(run):
        caches = [
            (layer.self_attn.attn.k_cache.clone(), layer.self_attn.attn.v_cache.clone()) for layer in model.layers
        ]
        result = run()
        for layer, (k, v) in zip(model.layers, caches):
            layer.self_attn.attn.k_cache.copy_(k)
            layer.self_attn.attn.v_cache.copy_(v)
        return result

    def capture(input_ids, positions, meta):
        if meta.num_prefills == 0 and not seen:
            assert fused.gives_logits(meta)
            seen["fused"] = from_the_same_cache(lambda: fused(model.embed_tokens(input_ids), positions, meta))
            seen["fused_logits"] = from_the_same_cache(lambda: fused.logits(input_ids, positions, meta).clone())
            model.fused_decode = None
            seen["layers"] = from_the_same_cache(lambda: model(input_ids, positions, meta))
            seen["layers_logits"] = causal_lm.compute_logits(seen["layers"])
            model.fused_decode = fused
        return decode_logits(input_ids, positions, meta)

    causal_lm.decode_logits = capture
    try:
        llm.generate(prompts, SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True), use_tqdm=False)
    finally:
        del causal_lm.decode_logits
    return BothWays(**seen)


PROMPTS = [[1, 2, 3, 4, 5, 6, 7], list(range(100, 140)), list(range(300, 310))]
PROMPTS += [list(range(500 + 40 * i, 509 + 41 * i)) for i in range(6)]  # 9: two groups of 4 rows and one more


@needs_dense_steps
@pytest.mark.parametrize("rows", [rows for rows in (1, 3, 4, 9) if rows <= dense_rows(torch.float32)])
def test_smollm2_fp32_step_is_the_layers_bit_for_bit(smollm2_llm, rows):
    assert smollm2_llm.engine.model_runner.model.model.fused_decode is not None
    both = first_decode_both_ways(smollm2_llm, PROMPTS[:rows])
    assert both.fused.shape == (rows, 576) and torch.equal(both.fused, both.layers)
    assert both.fused_logits.shape == (rows, 49152) and torch.equal(both.fused_logits, both.layers_logits)


@needs_dense_steps
@needs_bf16_packing
@pytest.mark.slow
def test_smollm2_bf16_step_and_tokens_are_the_layers(smollm2_dir):
    llm = LLM(str(smollm2_dir), dtype="bfloat16", max_model_len=1024, kv_cache_memory=64 << 20, seed=0)
    both = first_decode_both_ways(llm, PROMPTS[:3])  # bf16 fuses at least 4 rows
    assert both.fused.dtype == torch.bfloat16 and torch.equal(both.fused, both.layers)
    assert both.fused_logits.dtype == torch.float32 and torch.equal(both.fused_logits, both.layers_logits)


@needs_dense_steps
@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=needs_bf16_packing)])
def test_qkv_biases_and_steps_of_more_rows_than_it_takes(tiny_qwen2, dtype, monkeypatch):
    """Qwen2's q/k/v biases go through the C step too. Six sequences: steps of up to dense_rows fuse (with
    panels alone every size; with AVX-512 and AMX every size in fp32, and in bf16 every size on AMX tiles or
    up to 4 rows where the kernel refuses them; without AMX up to 8 rows in fp32, 4 in bf16) and the larger steps run the layers; either way the tokens are those of an
    engine that never fuses."""
    from kvtool.engine.runtime.worker.fused_decode import FusedDecode

    rows_fused = []
    original = FusedDecode._run
    monkeypatch.setattr(
        FusedDecode, "_run", lambda self, step, rows: rows_fused.append(rows) or original(self, step, rows)
    )
    prompts = [list(range(5 + i, 20 + 3 * i)) for i in range(6)]
    params = [SamplingParams(max_tokens=4 + 3 * i, temperature=0.0, ignore_eos=True) for i in range(6)]
    outputs = []
    for fused in (True, False):
        llm = LLM(str(tiny_qwen2[0]), dtype=dtype, kv_cache_memory=1 << 20)
        model = llm.engine.model_runner.model.model
        assert model.fused_decode is not None
        if not fused:
            model.fused_decode = None
        outputs.append([o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)])
    assert outputs[0] == outputs[1]
    assert max(rows_fused) == min(6, dense_rows(getattr(torch, dtype)))


@needs_dense_steps
def test_a_bf16_kv_cache_beside_fp32_activations_is_the_layers_bit_for_bit(tiny_qwen2, monkeypatch):
    """--kv-cache-dtype bfloat16 on an fp32 model: its decode steps fuse, and the C step writes and reads the
    16-bit cache as the layers do (K and V rounded once, attention in fp32)."""
    from kvtool.engine.runtime.worker.fused_decode import FusedDecode

    llm = LLM(str(tiny_qwen2[0]), dtype="float32", kv_cache_dtype="bfloat16", kv_cache_memory=1 << 20)
    model = llm.engine.model_runner.model.model
    assert model.layers[0].self_attn.attn.k_cache.dtype == torch.bfloat16
    prompts = [list(range(5 + i, 20 + 3 * i)) for i in range(3)]
    both = first_decode_both_ways(llm, prompts)
    assert both.fused.dtype == torch.float32 and torch.equal(both.fused, both.layers)
    assert torch.equal(both.fused_logits, both.layers_logits)
    rows_fused = []
    original = FusedDecode._run
    monkeypatch.setattr(
        FusedDecode, "_run", lambda self, step, rows: rows_fused.append(rows) or original(self, step, rows)
    )
    llm.generate(prompts, SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True), use_tqdm=False)
    assert rows_fused == [3, 3]


@needs_kernels
@pytest.mark.parametrize("rows", [1, 9, 65])
def test_quantized_smollm2_step_is_the_layers_bit_for_bit(smollm2_quantized_llm, rows):
    """Every linear layer kept quantized (Q4_1, the tied output layer Q8_0): steps of any row count run in one
    call, through the same kernels as the layers (codes in panels, on AMX-INT8 tiles where granted)."""
    fused_decode = smollm2_quantized_llm.engine.model_runner.model.model.fused_decode
    assert fused_decode is not None and fused_decode.max_rows == sys.maxsize
    prompts = [list(range(200 + 11 * i, 208 + 11 * i)) for i in range(rows)]
    both = first_decode_both_ways(smollm2_quantized_llm, prompts)
    assert both.fused.shape == (rows, 576) and torch.equal(both.fused, both.layers)
    assert both.fused_logits.shape == (rows, 49152) and torch.equal(both.fused_logits, both.layers_logits)


@needs_kernels
def test_quantized_qwen2_biases_and_tokens_are_the_layers(tmp_path, monkeypatch):
    """A Q8_0 Qwen2 GGUF: its q/k/v biases stay fp32 beside the codes and are added in the C step too; the
    tokens are those of an engine that never fuses."""
    from families import TINY, save_tiny_tokenizer, write_gguf
    from transformers import AutoModelForCausalLM, Qwen2Config

    monkeypatch.setenv("KVTOOL_CACHE_DIR", str(tmp_path / "cache"))  # the converted copy goes there
    torch.manual_seed(0)
    hf_model = AutoModelForCausalLM.from_config(Qwen2Config(**TINY, tie_word_embeddings=False), dtype=torch.float32)
    with torch.no_grad():  # transformers starts biases at zero
        for bias in (param for name, param in hf_model.named_parameters() if name.endswith(".bias")):
            bias.normal_(0.0, 0.5)
    save_tiny_tokenizer(tmp_path)
    write_gguf(tmp_path / "tiny-qwen2.gguf", hf_model, tmp_path, "qwen2", weight_type="Q8_0")
    prompts = [list(range(5 + i, 20 + 3 * i)) for i in range(6)]
    params = [SamplingParams(max_tokens=4 + 3 * i, temperature=0.0, ignore_eos=True) for i in range(6)]
    llm = LLM(str(tmp_path / "tiny-qwen2.gguf"), kv_cache_memory=1 << 20)
    model = llm.engine.model_runner.model.model
    assert llm.engine.config.model_config.quantization == "gguf" and model.layers[0].self_attn.qkv_proj.bias is not None
    both = first_decode_both_ways(llm, prompts)
    assert torch.equal(both.fused, both.layers) and torch.equal(both.fused_logits, both.layers_logits)
    outputs = []
    for fused_decode in (model.fused_decode, None):
        model.fused_decode = fused_decode
        outputs.append([o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)])
    assert outputs[0] == outputs[1]


def test_families_it_does_not_cover_run_their_layers(tiny_family, tiny_llama, monkeypatch):
    qwen3 = LLM(str(tiny_family("qwen3")[0]), dtype="float32", kv_cache_memory=1 << 20)  # q/k norms
    assert qwen3.engine.model_runner.model.model.fused_decode is None
    monkeypatch.setenv("KVTOOL_CPU_KERNELS", "0")  # plain torch: nothing packed, nothing fused
    plain = LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20)
    assert plain.engine.model_runner.model.model.fused_decode is None
