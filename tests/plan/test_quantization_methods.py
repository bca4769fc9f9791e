"""`--quantization` as vLLM takes it: every method of its QUANTIZATION_METHODS, refused where a release lacks it,
and mixed-precision checkpoints read part by part (each computed by hand here)."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.quantization_methods import METHODS, accepted
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.engine.sizing.weights import Stage, stage_weights_bytes, weights_bytes

runner = CliRunner()
MOE = {
    "model_type": "qwen3_moe",
    "num_hidden_layers": 2,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "intermediate_size": 4096,
    "moe_intermediate_size": 512,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
EMBEDDINGS = 2 * 32000 * 1024
ATTENTION = 2 * 1024 * 128 * (2 * 8 + 2 * 2)
EXPERTS = 2 * 8 * 3 * 1024 * 512
ROUTER = 2 * 1024 * 8  # the "mlp" part of a MoE model without shared experts
NVFP4, FP8 = 0.5 + 1 / 16, 1.0


def weights(quantization_config: dict | None = None, **config) -> int:
    extra = {"quantization_config": quantization_config} if quantization_config else {}
    return weights_bytes(spec_from_hf_config({**MOE, **config, **extra}, "m"))


def test_modelopt_reads_quant_algo_not_one_precision():
    # quantization/modelopt.py LINEAR_ALGOS: NVFP4 -> 4-bit values with an fp8 scale per 16
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}
    assert weights(nvfp4) == int((ATTENTION + EXPERTS + ROUTER) * NVFP4 + EMBEDDINGS * 2)
    legacy = {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "exclude_modules": ["*self_attn*"]}}
    assert weights(legacy) == int((EXPERTS + ROUTER) * FP8 + ATTENTION * 2 + EMBEDDINGS * 2)


def test_modelopt_mixed_precision_reads_each_layers_algo():
    # ModelOptMixedPrecisionConfig: quantized_layers {prefix: {quant_algo}}; here FP4 experts, FP8 attention
    layers = {f"model.layers.{i}.mlp.experts.{e}.{p}": {"quant_algo": "NVFP4"} for i in range(2) for e in range(8)
              for p in ("gate_proj", "up_proj", "down_proj")}  # fmt: skip
    layers |= {f"model.layers.{i}.self_attn.{p}": {"quant_algo": "FP8"} for i in range(2) for p in ("q_proj", "o_proj")}
    mixed = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    assert weights(mixed) == int(EXPERTS * NVFP4 + ATTENTION * FP8 + ROUTER * 2 + EMBEDDINGS * 2)


@pytest.mark.parametrize("expert_dtype, per_expert", [("fp4", 0.5 + 1 / 32), ("fp8", 1 + 4 / 16384), (None, None)])
def test_deepseek_v4_expert_dtype(expert_dtype, per_expert):
    # models/deepseek_v4 quant_config: fp8 128 x 128 blocks for the linear layers; experts MXFP4 when expert_dtype
    # is fp4, its default for deepseek_v4
    block = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    extra = {"expert_dtype": expert_dtype} if expert_dtype else {}
    got = weights(block, model_type="deepseek_v4", **extra)
    per_expert = per_expert or 0.5 + 1 / 32
    assert got == int(EXPERTS * per_expert + (ATTENTION + ROUTER) * (1 + 4 / 16384) + EMBEDDINGS * 2)


def test_online_fp8_of_a_bf16_checkpoint_keeps_embeddings_in_bf16():
    # quantization/fp8.py Fp8Config.get_quant_method: every LinearBase and the experts at 1 byte
    spec = spec_from_hf_config(MOE, "m")
    assert weights_bytes(spec, quantization="fp8") == ATTENTION + EXPERTS + ROUTER + EMBEDDINGS * 2
    assert weights_bytes(spec, quantization="experts_int8") == EXPERTS + (ATTENTION + ROUTER + EMBEDDINGS) * 2


def test_mxfp4_experts_are_padded_to_the_kernels_multiples():
    # quantization/mxfp4.py create_weights, Marlin (A100): intermediate per rank to x128, hidden to x256
    spec = resolve_model_spec("gpt-oss-120b")
    padded = 36 * 128 * 3 * 768 * 3072 * (0.5 + 1 / 32)  # 2880 / 4 = 720 -> 768; 2880 -> 3072
    rest = stage_weights_bytes(spec, tp=4, mxfp4_align=(1, 1)) - int(36 * 128 * 3 * 720 * 2880 * (0.5 + 1 / 32))
    assert stage_weights_bytes(spec, tp=4, mxfp4_align=(128, 256)) == pytest.approx(rest + padded, abs=8)
    assert stage_weights_bytes(spec, tp=4, stage=Stage(36), mxfp4_align=(64, 1)) > rest  # Triton: 720 stays


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--quantization", "fp7"], "unknown quantization 'fp7'"),
        (["--quantization", "mxfp4", "--vllm-version", "0.9.2"], "vLLM 0.9.2 does not accept --quantization mxfp4"),
        (["--quantization", "bitsandbytes", "--vllm-version", "0.28"], "does not accept --quantization bitsandbytes"),
    ],
)
def test_a_method_vllm_would_refuse_is_one_line_and_exit_2(args, problem):
    result = runner.invoke(app, ["plan", "--model", "llama3.1-8b", "--gpu", "H100-80GB", *args])
    assert result.exit_code == 2 and problem in result.output and len(result.output.strip().splitlines()) <= 2


def test_every_method_plans_in_a_release_that_has_it():
    for method in METHODS:
        version = next(f"0.{minor}.5" for minor in range(2, 34) if accepted(method, (0, minor, 5)))
        args = ["plan", "--model", "llama3.1-8b", "--gpu", "H100-80GB", "--vllm-version", version, "--json"]
        result = runner.invoke(app, [*args, "--quantization", method, "--max-model-len", "4096"])
        assert result.exit_code in (0, 1), (method, result.output)
        dense = weights_bytes(resolve_model_spec("llama3.1-8b"))  # experts_int8 leaves a dense model as it is
        assert json.loads(result.stdout)["memory"]["weights_bytes"] < dense or METHODS[method][1] == "experts"
