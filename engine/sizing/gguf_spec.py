"""Architecture facts from a GGUF file's metadata (the `gguf` package; weights are not read)."""

from pathlib import Path

from kvtool.engine.sizing.spec import ModelSpec, spec_from_hf_config
from kvtool.errors import UsageError

# the tensor types the CPU engine keeps quantized (engine/runtime/worker/gguf_weights.py decodes them)
ENGINE_QUANTIZED_TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K")
DENSE_TYPES = ("F32", "F16", "BF16")

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


def spec_from_gguf(path: str | Path) -> ModelSpec:
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


def engine_quantization(model: str, device_kind: str, dtype: str, quantization: str | None) -> str | None:
    """What the embedded engine does with a model's weights: "gguf" keeps a GGUF file's weights quantized
    (computing, and keeping the KV cache, in float32), None dequantizes them.

    "gguf" is the default for a .gguf file on the CPU with --dtype left at auto whose decoder layers are
    all stored in types the engine keeps quantized (a file with other types, or a dense one, is
    dequantized); an explicit --quantization is kept as given."""
    if quantization is not None:
        return quantization
    if device_kind != "cpu" or dtype != "auto" or not str(model).endswith(".gguf") or not Path(model).is_file():
        return None
    types = layer_weight_types(model)
    return "gguf" if types and types <= set(ENGINE_QUANTIZED_TYPES) else None


def layer_weight_types(path: str | Path) -> set[str]:
    """The tensor types of the decoder layers' weights (blk.*), dense ones (and 1-D norms) left out."""
    reader = _open(Path(path))
    types = {t.tensor_type.name for t in reader.tensors if t.name.startswith("blk.") and len(t.shape) > 1}
    return types - set(DENSE_TYPES)
