"""Architecture facts of a model, from the catalog, a config.json, a model folder or a GGUF file."""

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from kvtool.engine.sizing import hf_config as hf
from kvtool.engine.sizing import hf_encoders as towers_of
from kvtool.engine.sizing.mamba_state import MambaState, mamba_state
from kvtool.errors import UsageError


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    derived_max_model_len: int
    dtype: str
    tie_word_embeddings: bool
    num_parameters: int
    layer_types: tuple[str, ...]
    sliding_window: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    quantization: str | None = None
    source: str = ""
    parameter_groups: tuple[tuple[str, int], ...] = ()  # embeddings, attention, mlp, experts, other, encoder
    quantization_config: dict | None = field(default=None, compare=False, hash=False)
    checkpoint_dtypes: tuple[tuple[str, int], ...] = ()  # safetensors element counts per dtype, when read
    encoder_layers: int = 0  # the vision / audio tower, for its profiling run
    encoder_hidden_size: int = 0
    encoder_intermediate_size: int = 0
    mm_tokens_per_item: int = 0  # most text tokens one image or clip becomes
    modalities: tuple[str, ...] = ()
    encoder_patches_per_token: int = 1  # patches the tower sees per text token (a 2 x 2 merge: 4)
    moe_intermediate_size: int | None = None  # one routed expert's intermediate size
    mamba_state: MambaState | None = None  # per-request state of each mamba / linear-attention layer
    quant_extra: tuple[tuple[str, str], ...] = ()  # config facts a quantization reads beside quantization_config

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def num_attention_layers(self) -> int:
        return sum(kind in ("full_attention", "sliding_attention") for kind in self.layer_types)

    @property
    def num_state_layers(self) -> int:
        """Layers that keep a fixed state per request (mamba, linear attention) instead of per-token KV."""
        return sum(kind in ("mamba", "linear_attention") for kind in self.layer_types)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)


def spec_from_hf_config(config: dict, name: str = "", source: str = "") -> ModelSpec:
    """Read a ModelSpec from an HF config dict (text_config nesting, layer types, MLA, MoE, quantization,
    vision and audio towers)."""
    text = hf.text_config(config)
    try:
        spec = _spec_from_text_config(
            text, name or text.get("_name_or_path") or text.get("model_type", "model"), source
        )
        return _with_encoders(spec, config, text)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        raise UsageError(
            f"config of {name or 'the model'} is missing or has a bad architecture field ({err}).",
            "Give an HF config.json with num_hidden_layers, hidden_size and num_attention_heads.",
        ) from None


def _spec_from_text_config(text: dict, name: str, source: str) -> ModelSpec:
    dims = hf.Dims.of(text)
    kv_lora_rank = text.get("kv_lora_rank")
    groups = hf.parameter_groups(text, dims)
    return ModelSpec(
        name=name,
        model_type=str(text.get("model_type", "")),
        num_hidden_layers=dims.layers,
        hidden_size=dims.hidden,
        num_attention_heads=dims.heads,
        num_key_value_heads=dims.kv_heads,
        head_dim=dims.head_dim,
        vocab_size=dims.vocab,
        intermediate_size=dims.intermediate,
        max_position_embeddings=int(hf.first(text, *hf.MAX_LEN_KEYS, default=hf.DEFAULT_MAX_MODEL_LEN)),
        derived_max_model_len=hf.derive_max_model_len(text),
        dtype=hf.dtype_name(text),
        tie_word_embeddings=dims.tied,
        num_parameters=int(text.get("num_parameters") or sum(groups.values())),
        parameter_groups=tuple(groups.items()),
        quantization_config=quant if isinstance(quant := text.get("quantization_config"), dict) else None,
        layer_types=hf.layer_types(text, dims.layers),
        sliding_window=_sliding_window(text),
        kv_lora_rank=int(kv_lora_rank) if kv_lora_rank else None,
        qk_rope_head_dim=int(text.get("qk_rope_head_dim") or 0) if kv_lora_rank else None,
        num_experts=hf.num_experts(text),
        num_experts_per_tok=hf.first(text, "num_experts_per_tok", "moe_topk", "experts_per_token"),
        moe_intermediate_size=hf.moe_intermediate_size(text),
        quantization=hf.quantization(text),
        mamba_state=mamba_state(text),
        quant_extra=tuple((k, str(text[k])) for k in hf.QUANT_EXTRA_KEYS if text.get(k) is not None),
        source=source,
    )


def _with_encoders(spec: ModelSpec, config: dict, text: dict) -> ModelSpec:
    """Add the vision / audio towers: their weights, shape and the tokens one item becomes."""
    towers = towers_of.encoder_configs(config)
    encoder = sum(towers_of.encoder_parameters(tower, spec.hidden_size) for _, tower in towers)
    groups = dict(spec.parameter_groups)
    given = text.get("num_parameters")
    total = int(given) if given else spec.num_parameters + encoder
    encoder = min(encoder, total)
    groups["other"] = max(0, total - sum(groups.values()) - encoder)  # parts the shapes miss (MTP layers, biases)
    groups["encoder"] = encoder
    if not towers:
        return replace(spec, num_parameters=total, parameter_groups=tuple(groups.items()))
    modality, tower = towers[0]
    layers, hidden, intermediate = towers_of.encoder_shape(tower)
    return replace(
        spec,
        num_parameters=total,
        parameter_groups=tuple(groups.items()),
        encoder_layers=layers,
        encoder_hidden_size=hidden,
        encoder_intermediate_size=intermediate,
        mm_tokens_per_item=max(towers_of.encoder_tokens_per_item(config, m, t) for m, t in towers),
        modalities=tuple(m for m, _ in towers),
        encoder_patches_per_token=towers_of.patches_per_token(tower),
    )


def _sliding_window(text: dict) -> int | None:
    window = text.get("sliding_window")
    if isinstance(window, list):  # some configs give one per layer
        window = min((w for w in window if w), default=None)
    return int(window) if window and text.get("use_sliding_window") is not False else None


def spec_from_config_file(path: str | Path, name: str = "") -> ModelSpec:
    path = Path(path)
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(
            f"cannot read {path}: {err.__class__.__name__}.", "Check the path and its permissions."
        ) from None
    except json.JSONDecodeError as err:
        raise UsageError(
            f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}).",
            "Fix the file or point --model at a valid config.json.",
        ) from None
    if not isinstance(config, dict):
        raise UsageError(f"{path} holds no JSON object.", "Point --model at an HF config.json.")
    return spec_from_hf_config(
        config, name or (path.parent.name if path.name == "config.json" else path.stem), str(path)
    )
