"""A Qwen3 GGUF (llama.cpp tensor names, written with the `gguf` package) loads and gives the greedy
tokens of the HF model it was written from."""

import json

import torch
from engine_cases import prompts_of
from families import save_tiny_tokenizer
from test_families import hf_greedy

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM


def write_qwen3_gguf(path, hf_model, tokenizer_folder):
    import gguf

    config = hf_model.config
    writer = gguf.GGUFWriter(str(path), "qwen3")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    _add_tokenizer(writer, tokenizer_folder, config.vocab_size)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, config.num_hidden_layers)
    for name, tensor in hf_model.state_dict().items():
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight",)), tensor.float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _add_tokenizer(writer, folder, vocab_size):
    import gguf

    model = json.loads((folder / "tokenizer.json").read_text())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    tokens += [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t.startswith("<") else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    writer.add_eos_token_id(tokens.index("<|im_end|>"))


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
    write_qwen3_gguf(tmp_path / "tiny-qwen3.gguf", hf_model, tmp_path)
    llm = LLM(str(tmp_path / "tiny-qwen3.gguf"), dtype="float32", kv_cache_memory=4 << 20)
    assert llm.engine.spec.num_hidden_layers == 2
    prompts = prompts_of([5, 30])
    outputs = llm.generate(prompts, SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True), use_tqdm=False)
    for prompt, output in zip(prompts, outputs):
        assert output.outputs[0].token_ids == hf_greedy(hf_model, prompt, 12)
