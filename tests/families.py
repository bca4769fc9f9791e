"""Tiny random-weight checkpoints of each supported family, built with transformers' own configs."""

import json

import torch

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    initializer_range=0.3,
)
WINDOW = 24  # below the longest test prompt and not a multiple of the block size


def family_config(family: str):
    """The transformers config of a tiny model of `family`."""
    import transformers as hf

    both = ["sliding_attention", "full_attention"]
    configs = {
        "qwen3": lambda: hf.Qwen3Config(**TINY, head_dim=32, tie_word_embeddings=False),
        "gemma2": lambda: hf.Gemma2Config(
            **TINY,
            head_dim=16,
            sliding_window=WINDOW,
            query_pre_attn_scalar=24,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            tie_word_embeddings=False,
        ),
        "gemma3_text": lambda: hf.Gemma3TextConfig(
            **TINY,
            head_dim=16,
            sliding_window=WINDOW,
            layer_types=both,
            query_pre_attn_scalar=16,
            rope_local_base_freq=100.0,
            rope_scaling={"rope_type": "linear", "factor": 2.0},
            tie_word_embeddings=False,
        ),
        # partial rotary as in Phi-4-mini: a quarter of each 16-wide head turns (4 frequencies)
        "phi3": lambda: hf.Phi3Config(
            **TINY,
            original_max_position_embeddings=128,
            pad_token_id=0,
            rope_scaling={
                "rope_type": "longrope",
                "short_factor": [1.0 + i / 16 for i in range(2)],
                "long_factor": [2.0 + i / 4 for i in range(2)],
                "partial_rotary_factor": 0.25,
            },
        ),
        "qwen3_moe": lambda: hf.Qwen3MoeConfig(
            **TINY, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True
        ),
        "mixtral": lambda: hf.MixtralConfig(**TINY, num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW),
    }
    return configs[family]()


def save_tiny_family(folder, family: str):
    """Build the HF model (its own init, initializer_range 0.3), save it to `folder`, return it."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config(family), dtype=torch.float32).eval()
    model.save_pretrained(folder)
    return model


def save_tiny_tokenizer(folder, chat_template: str | None = CHAT_TEMPLATE) -> None:
    """A byte-level BPE of 400 tokens (fits the tiny vocabulary), trained on a few sentences."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    text = ["The capital of France is Paris.", "Write a haiku about the sea.", "def fibonacci(n): return n"] * 20
    tokenizer.train_from_iterator(text, trainer)
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=chat_template
    ).save_pretrained(folder)


def write_gguf(path, hf_model, tokenizer_folder, arch: str, weight_type: str | None = None) -> None:
    """`hf_model` as a GGUF file of llama.cpp's tensor names for `arch`; with `weight_type` (e.g. "Q8_0")
    its 2-D weights are quantized to that type by the gguf package, the rest stays fp32."""
    import gguf

    config = hf_model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    _add_tokenizer(writer, tokenizer_folder, config.vocab_size)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], config.num_hidden_layers)
    for name, tensor in hf_model.state_dict().items():
        data, gguf_name = tensor.float().numpy(), names.get_name(name, try_suffixes=(".weight", ".bias"))
        if weight_type is None or data.ndim != 2:
            writer.add_tensor(gguf_name, data)
        else:
            qtype = gguf.GGMLQuantizationType[weight_type]
            writer.add_tensor(gguf_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
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
