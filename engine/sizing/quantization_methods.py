"""vLLM's `--quantization` methods: how each stores a weight, which parts of the model it quantizes, and
the releases that accept it (`model_executor/layers/quantization/__init__.py` QUANTIZATION_METHODS, read in
every release's source from 0.2.7 to 0.34.0)."""

from dataclasses import dataclass

from kvtool.engine.sizing.defaults import ENGINE_QUANTIZATIONS
from kvtool.errors import UsageError


@dataclass(frozen=True)
class Scheme:
    """How a quantized weight is stored: bits per value, and per group of weights a scale (and a zero point)."""

    bits: float = 8
    group_size: int = 0  # weights per scale; 0: per tensor or per channel (scales are negligible)
    scale_bytes: float = 2
    zero_bits: float = 0  # packed zero points per group (GPTQ/AWQ asymmetric)

    @property
    def bytes_per_weight(self) -> float:
        per_group = (self.scale_bytes + self.zero_bits / 8) / self.group_size if self.group_size > 0 else 0
        return self.bits / 8 + per_group


FP8 = Scheme(8)
FP8_BLOCK = Scheme(8, 128 * 128, 4)  # DeepSeek-style 128 x 128 blocks, an fp32 scale each
INT4_G128 = Scheme(4, 128, 2, zero_bits=4)  # GPTQ / AWQ: fp16 scale and packed zero per 128
NVFP4 = Scheme(4, 16, 1)  # an fp8 scale per 16 (plus one fp32 global scale per tensor)
MXFP4 = Scheme(4, 32, 1)  # an 8-bit power-of-two scale per 32
MXFP8 = Scheme(8, 32, 1)
NF4 = Scheme(4, 64, 4)  # bitsandbytes: an fp32 absmax per 64
INT2 = Scheme(2, 8, 2)  # AQLM 2-bit codebooks, about 2.x bits per weight
LINEAR, EXPERTS = "linear", "experts"  # every decoder linear layer, or only the MoE experts

# method -> (storage when the config says nothing more, the parts it quantizes)
METHODS: dict[str, tuple[Scheme, str]] = {
    **dict.fromkeys(
        ("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "fp8_per_tensor", "fp8_per_channel", "online", "quark"),
        (FP8, LINEAR),
    ),
    **dict.fromkeys(("fp8_per_block", "deepseek_v4_fp8", "humming"), (FP8_BLOCK, LINEAR)),
    **dict.fromkeys(
        ("int8_per_channel_weight_only", "tpu_int8", "deepspeedfp", "torchao", "inc", "w4afp8", "sparseml"),
        (Scheme(8), LINEAR),
    ),
    "experts_int8": (Scheme(8), EXPERTS),
    **dict.fromkeys(
        (
            "awq",
            "awq_marlin",
            "auto_awq",
            "cpu_awq",
            "gptq",
            "gptq_marlin",
            "auto_gptq",
            "cpu_gptq",
            "gptq_bitblas",
            "bitblas",
            "marlin",
            "gptq_marlin_24",
            "moe_wna16",
            "auto-round",
            "auto_round",
            "rtn",
            "hqq",
            "qqq",
            "squeezellm",
            "fp_quant",
            "neuron_quant",
            "ipex",
            "lut_b_moe",
        ),
        (INT4_G128, LINEAR),
    ),
    "aqlm": (INT2, LINEAR),
    "bitsandbytes": (NF4, LINEAR),
    **dict.fromkeys(("modelopt_fp4", "nvfp4", "petit_nvfp4", "nvfp4_per_token"), (NVFP4, LINEAR)),
    **dict.fromkeys(("modelopt_mxfp8", "mxfp8"), (MXFP8, LINEAR)),
    "modelopt_mixed": (NVFP4, LINEAR),
    **dict.fromkeys(("mxfp4", "gpt_oss_mxfp4", "mxfp4_hadamard32"), (MXFP4, LINEAR)),
    "compressed-tensors": (FP8, LINEAR),
    "gguf": (Scheme(4, 32, 2), LINEAR),  # Q4-class blocks of 32 with an fp16 scale
}
QUANTIZATION_METHODS = tuple(METHODS)

# method -> (the last release checked that lacks it, the first release checked that lacks it again);
# a method outside that window is refused. Releases checked: 0.2.7 0.3.3 0.4.3 0.5.5 0.6.3 0.6.4 0.6.5 0.6.6
# 0.7.3 0.8.5 0.9.2 0.10.0 0.10.1 0.10.2 0.11 - 0.22 (each minor) 0.24 0.25 0.26 0.27 0.28 0.30 0.33 0.34.
RELEASE_WINDOWS: dict[str, tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]] = {
    "squeezellm": (None, (0, 6, 3)),
    "marlin": ((0, 2, 7), (0, 10, 2)),
    "aqlm": ((0, 3, 3), (0, 10, 1)),
    "deepspeedfp": ((0, 3, 3), (0, 15, 1)),
    "fp8": ((0, 3, 3), None),
    "gptq_marlin_24": ((0, 3, 3), (0, 16, 0)),
    "gptq_marlin": ((0, 3, 3), None),
    "sparseml": ((0, 3, 3), (0, 5, 5)),
    "tpu_int8": ((0, 4, 3), (0, 14, 0)),
    "fbgemm_fp8": ((0, 4, 3), None),
    "gguf": ((0, 4, 3), (0, 24, 0)),
    "awq_marlin": ((0, 4, 3), None),
    "compressed-tensors": ((0, 4, 3), None),
    "bitsandbytes": ((0, 4, 3), (0, 28, 0)),
    "qqq": ((0, 4, 3), (0, 10, 2)),
    "experts_int8": ((0, 4, 3), None),
    "modelopt": ((0, 5, 5), None),
    "neuron_quant": ((0, 5, 5), (0, 10, 2)),
    "ipex": ((0, 5, 5), (0, 16, 0)),
    "hqq": ((0, 6, 4), (0, 15, 1)),
    "ptpc_fp8": ((0, 6, 6), (0, 19, 0)),
    "quark": ((0, 6, 6), None),
    "moe_wna16": ((0, 6, 6), None),
    "nvfp4": ((0, 7, 3), (0, 9, 2)),
    "bitblas": ((0, 7, 3), (0, 16, 0)),
    "gptq_bitblas": ((0, 7, 3), (0, 16, 0)),
    "torchao": ((0, 7, 3), None),
    "modelopt_fp4": ((0, 8, 5), None),
    "auto-round": ((0, 8, 5), (0, 15, 1)),
    "rtn": ((0, 8, 5), (0, 15, 1)),
    "inc": ((0, 9, 2), None),
    "mxfp4": ((0, 10, 0), None),
    "petit_nvfp4": ((0, 10, 1), (0, 20, 0)),
    "fp_quant": ((0, 11, 0), (0, 34, 0)),
    "cpu_gptq": ((0, 11, 0), (0, 14, 0)),
    "cpu_awq": ((0, 11, 0), (0, 24, 0)),
    "modelopt_mxfp8": ((0, 15, 1), None),
    "modelopt_mixed": ((0, 16, 0), None),
    "mxfp8": ((0, 18, 1), None),
    **dict.fromkeys(
        (
            "humming",
            "gpt_oss_mxfp4",
            "deepseek_v4_fp8",
            "online",
            "fp8_per_tensor",
            "fp8_per_block",
            "int8_per_channel_weight_only",
        ),
        ((0, 19, 1), None),
    ),
    "auto_gptq": ((0, 21, 0), None),
    "auto_awq": ((0, 22, 1), None),
    "fp8_per_channel": ((0, 22, 1), None),
    "nvfp4_per_token": ((0, 25, 0), None),
    **dict.fromkeys(("w4afp8", "lut_b_moe", "mxfp4_hadamard32"), ((0, 33, 0), None)),
}


# Spellings vLLM resolves through the checkpoint it loads (config/model.py _verify_quantization: each method's
# override_quantization_method). From 0.17 the parser takes any string (`quantization: QuantizationMethods | str`,
# a metavar, no longer argparse's choices): an AutoRound checkpoint (quant_method "auto-round") hands whatever was
# given to INC, and GPTQ / AWQ checkpoints take "marlin" for their Marlin kernels. Before 0.17 only the listed
# methods parse ("auto-round" 0.9 - 0.15.0, "marlin" to 0.10.1).
CHECKPOINT_SPELLINGS = ("auto_round", "auto-round", "marlin")
NEVER_LISTED = ("auto_round",)  # AutoRound's package name, in no release's QUANTIZATION_METHODS
ANY_STRING_PARSED = (0, 17, 0)


def accepted(method: str, version: tuple[int, int, int]) -> bool:
    if method in CHECKPOINT_SPELLINGS and version >= ANY_STRING_PARSED:
        return True
    if method in NEVER_LISTED:
        return False
    lacks_until, lacks_from = RELEASE_WINDOWS.get(method, (None, None))
    return (lacks_until is None or version > lacks_until) and (lacks_from is None or version < lacks_from)


def check_quantization(method: str | None, version: tuple[int, int, int] | None, release_name: str | None) -> None:
    """One clear line for a method vLLM never had, or one the release (when known) does not accept."""
    if method is None or method in ENGINE_QUANTIZATIONS:
        return
    if method not in METHODS:
        choices = [name for name in METHODS if version is None or accepted(name, version)]
        raise UsageError(
            f"unknown quantization '{method}'.", f"Use one of vLLM's --quantization methods: {', '.join(choices)}."
        )
    if version is not None and not accepted(method, version):
        raise UsageError(
            f"vLLM {release_name} does not accept --quantization {method}.",
            "Name a release that has it with --vllm-version, or leave --quantization to the checkpoint's config.",
        )
