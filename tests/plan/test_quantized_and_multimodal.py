"""Weight bytes of quantized and multimodal models, each computed by hand here, and the encoder's profiling run."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.quantization import checkpoint_bytes
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.engine.sizing.weights import weights_bytes

runner = CliRunner()
TEXT = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
EMBEDDINGS = 2 * 32000 * 1024  # input embeddings and lm_head (untied), kept in bf16 by every method below
ATTENTION = 4 * 1024 * 128 * (2 * 8 + 2 * 2)  # q, o: 8 heads; k, v: 2 heads; head_dim 128
MLP = 4 * 3 * 1024 * 4096
LINEAR = ATTENTION + MLP


def weights(quantization_config: dict) -> int:
    return weights_bytes(spec_from_hf_config({**TEXT, "quantization_config": quantization_config}, "m"))


def test_unquantized_bf16():
    assert weights_bytes(spec_from_hf_config(TEXT, "m")) == (EMBEDDINGS + LINEAR) * 2


def test_fp8_per_tensor_and_in_128_x_128_blocks():
    assert weights({"quant_method": "fp8"}) == LINEAR * 1 + EMBEDDINGS * 2
    # one fp32 scale per 128 x 128 block of weights
    assert weights({"quant_method": "fp8", "weight_block_size": [128, 128]}) == int(
        LINEAR * (1 + 4 / 16384) + EMBEDDINGS * 2
    )


def test_awq_and_gptq_4_bit_with_group_scales_and_zero_points():
    # 4 bits per weight, and per group of 128: an fp16 scale (2 bytes) and a packed 4-bit zero point
    per_weight = 0.5 + (2 + 0.5) / 128
    assert weights({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}) == int(
        LINEAR * per_weight + EMBEDDINGS * 2
    )
    assert weights({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}) == int(
        LINEAR * per_weight + EMBEDDINGS * 2
    )
    assert weights({"quant_method": "gptq", "bits": 8, "group_size": 32}) == int(
        LINEAR * (1 + (2 + 1) / 32) + EMBEDDINGS * 2
    )


def test_mxfp4_quantizes_only_the_experts_of_gpt_oss():
    spec = resolve_model_spec("gpt-oss-20b")
    experts = 24 * 32 * 3 * 2880 * 2880  # 24 layers x 32 experts x gate, up, down of 2880 x 2880
    rest = spec.num_parameters - experts  # attention, router, embeddings: bf16 (modules_to_not_convert)
    assert weights_bytes(spec) == int(experts * (0.5 + 1 / 32) + rest * 2)  # 4 bits + an 8-bit scale per 32


def test_nvfp4_bitsandbytes_and_compressed_tensors():
    assert weights({"quant_method": "modelopt_fp4"}) == int(LINEAR * (0.5 + 1 / 16) + EMBEDDINGS * 2)
    assert weights({"quant_method": "bitsandbytes", "load_in_4bit": True}) == int(
        LINEAR * (0.5 + 4 / 64) + EMBEDDINGS * 2
    )
    w4a16 = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128},
            }
        },
    }
    assert weights(w4a16) == int(LINEAR * (0.5 + 2 / 128) + EMBEDDINGS * 2)


def test_the_checkpoint_itself_wins_when_its_dtype_counts_are_known():
    # an AWQ checkpoint as its safetensors header counts it: packed int32 weights (8 per element), fp16 scales,
    # packed int32 zeros, bf16 embeddings
    counts = {"I32": LINEAR // 8 + LINEAR // 128 // 8, "F16": LINEAR // 128, "BF16": EMBEDDINGS}
    assert checkpoint_bytes(counts, 2) == (LINEAR // 8 + LINEAR // 1024) * 4 + LINEAR // 128 * 2 + EMBEDDINGS * 2
    assert checkpoint_bytes({"F32": 1000}, 2) == 2000  # an fp32 checkpoint is loaded in bf16


QWEN_VL = {
    "model_type": "qwen2_5_vl",
    "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "qwen2_5_vl_text",
        "num_hidden_layers": 28,
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "max_position_embeddings": 128000,
    },
    "vision_config": {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 3584,
    },
}


def test_a_vision_tower_is_counted_and_profiled(tmp_path):
    spec = spec_from_hf_config(QWEN_VL, "qwen-vl")
    text = 2 * 152064 * 3584 + 28 * 3584 * 128 * (2 * 28 + 2 * 4) + 28 * 3 * 3584 * 18944
    # 32 ViT blocks (attention 4 h^2, MLP 2 h i), the 2 x 14 x 14 x 3 patch embedding, and the 2 x 2 merger into 3584
    vision = 32 * (4 * 1280**2 + 2 * 1280 * 3420) + 3 * 14 * 14 * 1280 * 2 + (1280 * 4) ** 2 + 1280 * 4 * 3584
    assert spec.num_parameters == text + vision and weights_bytes(spec) == (text + vision) * 2
    assert spec.modalities == ("image",) and spec.mm_tokens_per_item == 12845056 // (14 * 14) // 4  # 16384
    (tmp_path / "config.json").write_text(json.dumps(QWEN_VL))
    base = ["plan", "--model", str(tmp_path), "--gpu", "H100-80GB", "--max-model-len", "32768", "--json"]
    report = json.loads(runner.invoke(app, base).stdout)
    # one item of 16384 tokens fits the max(8192, 16384) budget: 65536 patches through the tower; its 16384
    # outputs stay alive through the text forward: the peak is max(tower, text peak + outputs)
    tower, outputs = 16384 * 4 * (4 * 1280 + 2 * 3420) * 2, 16384 * 3584 * 2
    text = report["memory"]["activation_bytes"]
    assert report["memory"]["encoder_bytes"] == max(tower, text + outputs) - text == outputs
    text_only = json.loads(runner.invoke(app, [*base, "--limit-mm-per-prompt", "image=0"]).stdout)
    assert text_only["memory"]["encoder_bytes"] == 0
    assert "--limit-mm-per-prompt '{\"image\":0}'" in text_only["recommendations"]["vllm_serve"]
    old = json.loads(runner.invoke(app, [*base, "--limit-mm-per-prompt", "image=0", "--vllm-version", "0.6.5"]).stdout)
    assert "--limit-mm-per-prompt image=0" in old["recommendations"]["vllm_serve"]


def test_an_audio_tower_is_counted():
    config = {
        "model_type": "qwen2_audio",
        "text_config": {**TEXT},
        "audio_config": {
            "d_model": 1280,
            "encoder_layers": 32,
            "encoder_ffn_dim": 5120,
            "max_source_positions": 1500,
            "num_mel_bins": 128,
        },
    }
    spec = spec_from_hf_config(config, "audio")
    assert spec.modalities == ("audio",) and spec.mm_tokens_per_item == 750
    # 32 Whisper blocks, two kernel-3 convolutions (128 mel bins -> 1280 -> 1280), a 1280 -> 1024 projector
    tower = 32 * (4 * 1280**2 + 2 * 1280 * 5120) + 3 * 128 * 1280 + 3 * 1280 * 1280 + 1280 * 1024
    assert spec.num_parameters == EMBEDDINGS + LINEAR + tower


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--enforce-eager"], "--enforce-eager"),
        (["--block-size", "32"], "--block-size 32"),
        (["--dtype", "float16"], "--dtype float16"),
        (["--quantization", "fp8"], "--quantization fp8"),
        (["--kv-cache-dtype", "fp8_e4m3"], "--kv-cache-dtype fp8_e4m3"),
    ],
)
def test_vllm_serve_carries_every_flag_the_plan_assumed(flags, expected):
    result = runner.invoke(
        app, ["plan", "--model", "llama3.1-8b", "--gpu", "H100-80GB", "--max-model-len", "8192", *flags, "--json"]
    )
    assert expected in json.loads(result.stdout)["recommendations"]["vllm_serve"]
