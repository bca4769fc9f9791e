"""The vision and audio towers a multimodal config nests: their shapes, weights and the text tokens one item
becomes, the way vLLM's processors count them (no torch)."""

from kvtool.engine.sizing.hf_config import first
from kvtool.engine.sizing.hf_defaults import with_defaults

ENCODER_KEYS = {"vision_config": "image", "audio_config": "audio", "vision_tower_config": "image"}
# The most text tokens one image becomes where the tower resizes freely: the Qwen-VL processors' pixel limits give
# 16,384 merged tokens alike (Qwen2-VL and 2.5-VL: 12,845,056 pixels of 14 x 14 patches, 2 x 2 merged; Qwen3-VL
# and 3.5: 16,777,216 pixels of 16 x 16 patches, 2 x 2 merged).
DEFAULT_MAX_IMAGE_TOKENS = 16384


def encoder_configs(config: dict) -> list[tuple[str, dict]]:
    """(modality, sub-config) of each vision or audio tower a multimodal config nests."""
    return [
        (modality, with_defaults(config, key))
        for key, modality in ENCODER_KEYS.items()
        if isinstance(config.get(key), dict)
    ]


def encoder_shape(tower: dict) -> tuple[int, int, int]:
    """(layers, hidden, intermediate) of a ViT / Whisper-style encoder."""
    hidden = int(first(tower, "hidden_size", "embed_dim", "d_model", "width", default=0) or 0)
    layers = int(first(tower, "num_hidden_layers", "depth", "encoder_layers", "num_layers", "layers", default=0) or 0)
    ratio = tower.get("mlp_ratio")
    intermediate = int(
        first(tower, "intermediate_size", "encoder_ffn_dim", "ffn_dim", default=(ratio or 4) * hidden) or 0
    )
    return layers, hidden, intermediate


def encoder_parameters(tower: dict, text_hidden: int) -> int:
    """Tower weights from its shapes: blocks, patch embedding and the projector into the text model."""
    layers, hidden, intermediate = encoder_shape(tower)
    blocks = layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    if tower.get("num_mel_bins"):  # Whisper-style: two kernel-3 convolutions over the mel bins, a linear projector
        return blocks + 3 * int(tower["num_mel_bins"]) * hidden + 3 * hidden * hidden + hidden * text_hidden
    patch, merge = int(tower.get("patch_size") or 14), _merge(tower)
    channels = int(tower.get("num_channels") or tower.get("in_chans") or tower.get("in_channels") or 3)
    projected = hidden * merge * merge
    return (
        blocks
        + channels * patch * patch * hidden * int(tower.get("temporal_patch_size") or 1)
        + projected * projected
        + projected * text_hidden
    )


def encoder_tokens_per_item(config: dict, modality: str, tower: dict) -> int:
    """Most text-model tokens one image (at its largest) or audio clip becomes."""
    if modality == "audio":
        return int(tower.get("max_source_positions") or 3000) // 2
    if config.get("mm_tokens_per_image"):
        return int(config["mm_tokens_per_image"])
    patch, merge = int(tower.get("patch_size") or 14), _merge(tower)
    if tower.get("image_size"):
        side = int(tower["image_size"]) // patch
        return max(1, side * side // (merge * merge))
    return DEFAULT_MAX_IMAGE_TOKENS


def patches_per_token(tower: dict) -> int:
    """Patches the tower encodes for each text token it yields (a 2 x 2 spatial merge: 4)."""
    return _merge(tower) ** 2


def _merge(tower: dict) -> int:
    if tower.get("spatial_merge_size"):
        return int(tower["spatial_merge_size"])
    ratio = tower.get("pixel_shuffle_ratio")
    return round(1 / ratio) if ratio else 1
