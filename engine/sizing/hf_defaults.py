"""The defaults transformers fills into a config that leaves fields out, for the model types that arrive
nested (a multimodal model's `text_config` and `vision_config`), without importing transformers.

A LLaVA-1.5 config saved by transformers 4.36 keeps only the fields of its text model that differ from
LlamaConfig's defaults; vLLM loads it through transformers, which instantiates LlamaConfig and so fills
hidden_size 4096, 32 layers and the rest. plan fills the same values from this table. Each row is the
`__init__` default of that model type's config class (transformers `models/<type>/configuration_<type>.py`;
tests/plan/test_hf_defaults.py checks the table against the installed transformers when there is one).
"""

MODEL_TYPE_DEFAULTS = {
    "llama": dict(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    ),
    "mistral": dict(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        sliding_window=4096,
        tie_word_embeddings=False,
    ),
    "qwen2": dict(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=22016,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=32768,
        use_sliding_window=False,
        tie_word_embeddings=False,
    ),
    "gemma": dict(
        vocab_size=256000,
        hidden_size=3072,
        intermediate_size=24576,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=256,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "gemma2": dict(
        vocab_size=256000,
        hidden_size=2304,
        intermediate_size=9216,
        num_hidden_layers=26,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        max_position_embeddings=8192,
        sliding_window=4096,
        tie_word_embeddings=True,
    ),
    "gemma3_text": dict(
        vocab_size=262208,
        hidden_size=2304,
        intermediate_size=9216,
        num_hidden_layers=26,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        max_position_embeddings=131072,
        sliding_window=4096,
        _sliding_window_pattern=6,
        tie_word_embeddings=True,
    ),
    "clip_vision_model": dict(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, image_size=224, patch_size=32, num_channels=3
    ),
    "siglip_vision_model": dict(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, image_size=224, patch_size=16, num_channels=3
    ),
}

# The model type a multimodal config gives a nested dict that names none (e.g. LlavaConfig.__init__:
# `text_config["model_type"] = text_config.get("model_type", "llama")`).
NESTED_MODEL_TYPES = {
    "llava": {"text_config": "llama", "vision_config": "clip_vision_model"},
    "llava_next": {"text_config": "llama", "vision_config": "clip_vision_model"},
    "llava_next_video": {"text_config": "llama", "vision_config": "clip_vision_model"},
    "vipllava": {"text_config": "llama", "vision_config": "clip_vision_model"},
    "llava_onevision": {"text_config": "qwen2", "vision_config": "siglip_vision_model"},
    "paligemma": {"text_config": "gemma", "vision_config": "siglip_vision_model"},
    "gemma3": {"text_config": "gemma3_text", "vision_config": "siglip_vision_model"},
}


def with_type_defaults(config: dict) -> dict:
    """A top-level config with the fields transformers would fill for its model type (gemma-2-9b-it's config
    leaves tie_word_embeddings to Gemma2Config's True)."""
    return {**MODEL_TYPE_DEFAULTS.get(config.get("model_type"), {}), **config}  # an explicit null stays null


def with_defaults(config: dict, key: str) -> dict:
    """The nested `key` sub-config of `config` with the fields transformers would fill in ({} when absent)."""
    inner = config.get(key)
    if not isinstance(inner, dict):
        return {}
    model_type = inner.get("model_type") or NESTED_MODEL_TYPES.get(config.get("model_type"), {}).get(key)
    defaults = MODEL_TYPE_DEFAULTS.get(model_type, {})
    filled = {**defaults, **{k: v for k, v in inner.items() if v is not None or k not in defaults}}
    return {**filled, "model_type": model_type} if model_type else filled
