"""Architecture facts read from an HF `config.json` dict, the way vLLM reads them (no torch)."""

from dataclasses import dataclass

from kvtool.engine.sizing.hf_defaults import with_defaults

# vLLM's keys for the model's context length, in its order; the smallest present wins (docs/design.md).
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
DEFAULT_MAX_MODEL_LEN = 2048
# RoPE types whose max_position_embeddings is already the scaled length (vLLM 0.30+).
UNSCALED_ROPE_TYPES = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
LAYER_TYPE_NAMES = {
    "full_attention": "full_attention",
    "attention": "full_attention",
    "global": "full_attention",
    "sliding_attention": "sliding_attention",
    "sliding_window": "sliding_attention",
    "local": "sliding_attention",
    "linear_attention": "linear_attention",
    "mamba": "mamba",
    "mamba2": "mamba",
}
HYBRID_PATTERN_KINDS = {"M": "mamba", "*": "full_attention"}  # other letters: layers without KV or state
DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}


# config facts beside quantization_config that decide how weights are stored (DeepSeek-V4's expert dtype)
QUANT_EXTRA_KEYS = ("expert_dtype",)


def text_config(config: dict) -> dict:
    """The language-model part of a config; multimodal configs nest it under `text_config`, with the fields
    it leaves out filled as transformers fills them."""
    key = "text_config" if isinstance(config.get("text_config"), dict) else "llm_config"
    inner = with_defaults(config, key)
    if not inner:
        return config
    outer = {k: config[k] for k in ("quantization_config", "torch_dtype", "dtype", "model_type") if k in config}
    return {**outer, **{k: v for k, v in inner.items() if v is not None or k not in outer}}


def first(config: dict, *keys, default=None):
    """The first key present with a non-null value."""
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def num_kv_heads(config: dict, num_heads: int) -> int:
    if config.get("multi_query") and not config.get("new_decoder_architecture"):
        return 1
    return int(first(config, *KV_HEAD_KEYS, default=num_heads))


def head_dim(config: dict, hidden_size: int, num_heads: int) -> int:
    value = first(config, "head_dim", "hidden_size_per_head", "attention_head_dim")
    if value and value > 0:
        return int(value)
    if config.get("kv_lora_rank") and config.get("qk_nope_head_dim") is not None:
        return int(config["qk_nope_head_dim"]) + int(config.get("qk_rope_head_dim") or 0)
    return hidden_size // num_heads


def derive_max_model_len(config: dict) -> int:
    """vLLM's derived max_model_len (vLLM 0.33's rules, docs/design.md)."""
    lengths = [config[key] for key in MAX_LEN_KEYS if isinstance(config.get(key), (int, float))]
    derived = min(lengths) if lengths else DEFAULT_MAX_MODEL_LEN
    if config.get("model_max_length"):
        derived = config["model_max_length"]
    rope = config.get("rope_scaling") or config.get("rope_parameters") or {}
    rope_type = (rope.get("rope_type") or rope.get("type")) if isinstance(rope, dict) else None
    if rope_type == "longrope" and config.get("original_max_position_embeddings"):
        return int(config["original_max_position_embeddings"])  # vLLM 0.15+: the unscaled length by default
    if rope_type and rope_type not in UNSCALED_ROPE_TYPES and config.get("model_type") not in ("gemma3", "gemma3_text"):
        derived *= rope.get("factor") or 1.0
    return int(derived)


def layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    """Per-layer attention kind: full, sliding window, linear attention or mamba."""
    if isinstance(config.get("layer_types"), list):
        return tuple(LAYER_TYPE_NAMES.get(kind, "full_attention") for kind in config["layer_types"])
    pattern = config.get("hybrid_override_pattern")  # Nemotron-H: "M" mamba, "*" attention, "-" MLP, "E" MoE
    if isinstance(pattern, str):
        return tuple(HYBRID_PATTERN_KINDS.get(c, "mlp") for c in pattern)
    if "attn_layer_period" in config:  # Jamba
        period, offset = config["attn_layer_period"], config.get("attn_layer_offset", 0)
        return tuple("full_attention" if i % period == offset else "mamba" for i in range(num_layers))
    if "full_attention_interval" in config:  # Qwen3-Next: every n-th layer is full attention
        every = config["full_attention_interval"]
        return tuple("full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(num_layers))
    if config.get("model_type") in ("mamba", "mamba2", "falcon_mamba"):
        return ("mamba",) * num_layers
    return _sliding_layer_types(config, num_layers)


def _sliding_layer_types(config: dict, num_layers: int) -> tuple[str, ...]:
    if not config.get("sliding_window") or config.get("use_sliding_window") is False:
        return ("full_attention",) * num_layers
    model_type = config.get("model_type", "")
    if model_type.startswith("gemma2"):  # even layers slide
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers))
    period = first(config, "sliding_window_pattern", "_sliding_window_pattern")
    if period:  # Gemma 3: every `period`-th layer is global
        return tuple("full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(num_layers))
    if config.get("use_sliding_window") and "max_window_layers" in config:  # Qwen2: layers from max_window_layers slide
        return tuple(
            "sliding_attention" if i >= config["max_window_layers"] else "full_attention" for i in range(num_layers)
        )
    return ("sliding_attention",) * num_layers


def moe_intermediate_size(config: dict) -> int | None:
    if not num_experts(config):
        return None
    return int(first(config, "moe_intermediate_size", "expert_intermediate_size", "intermediate_size"))


def num_experts(config: dict) -> int | None:
    value = first(config, *EXPERT_KEYS)
    return int(value) if value else None


def dtype_name(config: dict) -> str:
    raw = str(first(config, "torch_dtype", "dtype", default="bfloat16")).removeprefix("torch.")
    return DTYPE_NAMES.get(raw, "bfloat16")


def quantization(config: dict) -> str | None:
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        return quant.get("quant_method") or quant.get("format")
    return None


@dataclass(frozen=True)
class Dims:
    """A text config's shapes, read under any of the names configs give them."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    tied: bool  # the output layer shares the input embedding's weights

    @classmethod
    def of(cls, config: dict) -> "Dims":
        layers = int(first(config, "num_hidden_layers", "n_layer", "num_layers"))
        hidden = int(first(config, "hidden_size", "n_embd", "d_model"))
        heads = int(first(config, "num_attention_heads", "n_head", "num_heads"))
        return cls(
            hidden=hidden,
            layers=layers,
            heads=heads,
            kv_heads=num_kv_heads(config, heads),
            head_dim=head_dim(config, hidden, heads),
            vocab=int(config.get("vocab_size") or 0),
            intermediate=int(first(config, "intermediate_size", "ffn_hidden_size", "n_inner", default=4 * hidden)),
            tied=bool(config.get("tie_word_embeddings", False)),
        )


def parameter_groups(config: dict, dims: Dims) -> dict[str, int]:
    """Parameters by part: embeddings (input and output), attention, dense MLP, MoE experts."""
    hidden, layers, heads, kv_heads, dim = dims.hidden, dims.layers, dims.heads, dims.kv_heads, dims.head_dim
    vocab, intermediate, tied = dims.vocab, dims.intermediate, dims.tied
    embeddings = vocab * hidden * (1 if tied else 2)
    if config.get("kv_lora_rank"):
        attention = _mla_parameters(config, hidden, heads)
    else:
        attention = hidden * dim * (2 * heads + 2 * kv_heads)
    experts = num_experts(config)
    dense_layers = int(config.get("first_k_dense_replace") or 0) if experts else layers
    moe_layers = layers - dense_layers
    expert_size = int(first(config, "moe_intermediate_size", "expert_intermediate_size", default=intermediate))
    shared = int(first(config, "n_shared_experts", "num_shared_experts", default=0) or 0)
    shared_size = int(config.get("shared_expert_intermediate_size") or expert_size * shared)
    mlp = dense_layers * 3 * hidden * intermediate + moe_layers * (3 * hidden * shared_size + hidden * (experts or 0))
    routed = moe_layers * 3 * hidden * expert_size * (experts or 0)
    return {
        "embeddings": int(embeddings),
        "attention": int(layers * attention),
        "mlp": int(mlp),
        "experts": int(routed),
    }


def _mla_parameters(config: dict, hidden: int, heads: int) -> int:
    rank, rope = int(config["kv_lora_rank"]), int(config.get("qk_rope_head_dim") or 0)
    nope, v_dim = int(config.get("qk_nope_head_dim") or 0), int(config.get("v_head_dim") or 0)
    q_rank = config.get("q_lora_rank")
    q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
    return q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
