"""Architecture facts from a GGUF file's metadata (the `gguf` package; weights are not read)."""

from pathlib import Path

from kvtool.errors import UsageError

# GGUF key (after "{arch}.") -> HF config key
GGUF_TO_HF = {
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.sliding_window": "sliding_window",
    "attention.kv_lora_rank": "kv_lora_rank",
    "rope.freq_base": "rope_theta",
    "vocab_size": "vocab_size",
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
}


def read_gguf_config(path: str | Path) -> dict:
    """An HF-style config dict built from the GGUF metadata of `path`."""
    reader = _open(Path(path))
    fields = {name: _value(field) for name, field in reader.fields.items() if not name.startswith("tokenizer.ggml.")}
    arch = fields.get("general.architecture")
    if not arch:
        raise UsageError(
            f"{path} has no general.architecture in its GGUF metadata.", "Use a GGUF made by llama.cpp's converter."
        )
    config = {hf_key: fields[f"{arch}.{key}"] for key, hf_key in GGUF_TO_HF.items() if f"{arch}.{key}" in fields}
    if "vocab_size" not in config and "tokenizer.ggml.tokens" in reader.fields:
        config["vocab_size"] = len(reader.fields["tokenizer.ggml.tokens"].data)
    if "kv_lora_rank" in config:
        config["qk_rope_head_dim"] = fields.get(f"{arch}.rope.dimension_count")
    tensor_names = {tensor.name for tensor in reader.tensors}
    config.update(
        model_type=arch,
        torch_dtype="bfloat16",
        tie_word_embeddings="output.weight" not in tensor_names,
        num_parameters=sum(int(tensor.n_elements) for tensor in reader.tensors),
        quantization_config={"quant_method": "gguf", "file_type": fields.get("general.file_type")},
        _name_or_path=fields.get("general.name") or Path(path).stem,
    )
    return config


def spec_from_gguf(path: str | Path):
    from kvtool.engine.sizing.spec import spec_from_hf_config

    config = read_gguf_config(path)
    return spec_from_hf_config(config, Path(path).stem, str(path))


def _open(path: Path):
    from gguf import GGUFReader

    try:
        return GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
        raise UsageError(
            f"cannot read GGUF file {path}: {err}.",
            "Check that the file is a complete .gguf (re-download or re-convert it).",
        ) from None


def _value(field):
    try:
        return field.contents()
    except (ValueError, IndexError, TypeError):
        return None
