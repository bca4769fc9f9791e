"""Weight bytes as vLLM loads them: all GPUs together, or one GPU of one pipeline stage (its share of the
layers, the input embedding on the first stage, the output layer on the last), with the padding a
quantization kernel adds to the expert shapes."""

from dataclasses import dataclass
from pathlib import Path

from kvtool.engine.sizing.defaults import DTYPES
from kvtool.engine.sizing.hf_config import DTYPE_NAMES
from kvtool.engine.sizing.quantization import QuantFacts, checkpoint_bytes, quant_facts, quantized_weight_bytes
from kvtool.engine.sizing.quantization_methods import MXFP4
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import UsageError

PER_LAYER_PARTS = ("attention", "mlp", "experts", "other")


@dataclass(frozen=True)
class Stage:
    """The layers one pipeline stage holds, and whether it holds the input embedding / the output layer."""

    layers: int
    first: bool = True
    last: bool = True


def resolve_dtype(dtype: str, checkpoint_dtype: str | None, bf16_supported: bool = True) -> str:
    """vLLM's `--dtype`: `auto` keeps a 16-bit checkpoint dtype and runs anything else in bfloat16
    (float16 on devices without bfloat16)."""
    if dtype == "auto":
        name = DTYPE_NAMES.get(str(checkpoint_dtype).removeprefix("torch."))
        if name in ("bfloat16", "float16"):
            return name
        return "bfloat16" if bf16_supported else "float16"
    if dtype not in DTYPE_NAMES:
        raise UsageError(f"unknown dtype '{dtype}'.", f"Use one of: {', '.join(DTYPES)}.")
    return DTYPE_NAMES[dtype]


def run_dtype(dtype: str, checkpoint_dtype: str | None, quantization: str | None, bf16_supported: bool = True) -> str:
    """The dtype the embedded engine computes in: float32 for GGUF weights it keeps quantized (their kernels compute
    in fp32, and `auto` KV follows), else vLLM's `--dtype` rule."""
    if quantization == "gguf":
        return "float32"
    return resolve_dtype(dtype, checkpoint_dtype, bf16_supported)


def element_bytes(spec: ModelSpec, dtype: str) -> int:
    return 4 if resolve_dtype(dtype, spec.dtype) == "float32" else 2


def model_quant_facts(spec: ModelSpec, quantization: str | None = None) -> QuantFacts | None:
    """The quantization vLLM applies: the method named with --quantization, else the checkpoint's own."""
    method = quantization or (None if spec.quantization_config else spec.quantization)
    extra = {"model_type": spec.model_type, **dict(spec.quant_extra)}
    return quant_facts(spec.quantization_config, method, extra)


def weights_bytes(spec: ModelSpec, dtype: str = "auto", quantization: str | None = None) -> int:
    """All weights of the model, on all GPUs together: the checkpoint's own tensors when known, else the
    parameter groups at the quantization's bits (embeddings and encoder towers in the model dtype)."""
    if spec.source.endswith(".gguf") and Path(spec.source).is_file() and quantization in (None, "gguf"):
        return Path(spec.source).stat().st_size
    element = element_bytes(spec, dtype)
    facts = model_quant_facts(spec, quantization)
    if spec.checkpoint_dtypes and (quantization is None or quantization == spec.quantization):
        return checkpoint_bytes(dict(spec.checkpoint_dtypes), element)
    if facts is None:
        return spec.num_parameters * element
    return quantized_weight_bytes(_groups(spec), facts, element)


def stage_weights_bytes(
    spec: ModelSpec,
    dtype: str = "auto",
    quantization: str | None = None,
    tp: int = 1,
    stage: Stage | None = None,
    mxfp4_align: tuple[int, int] = (64, 1),
) -> int:
    """One GPU's weights: its stage's share of every part, split over tensor parallelism; MXFP4 experts
    padded to the kernel's alignment (intermediate per rank, hidden)."""
    stage = stage or Stage(spec.num_hidden_layers)
    total = weights_bytes(spec, dtype, quantization)
    if stage == Stage(spec.num_hidden_layers) and spec.checkpoint_dtypes:
        return total // tp  # the checkpoint's own bytes, whole
    element, facts = element_bytes(spec, dtype), model_quant_facts(spec, quantization)
    parts = {name: _part_bytes(name, count, facts, element) for name, count in _groups(spec).items()}
    if facts is not None and facts.scheme("experts") == MXFP4 and spec.num_experts:
        parts["experts"] = _padded_mxfp4_experts(spec, tp, mxfp4_align) * tp
    scale = total / sum(parts.values()) if spec.checkpoint_dtypes and sum(parts.values()) else 1.0
    share = stage.layers / max(1, spec.num_hidden_layers)
    held = sum(parts.get(name, 0) for name in PER_LAYER_PARTS) * share
    held += parts.get("embeddings", 0) * _embedding_share(spec, stage)
    held += parts.get("encoder", 0) * stage.first
    return int(held * scale) // tp


def _groups(spec: ModelSpec) -> dict[str, int]:
    return dict(spec.parameter_groups) or {"other": spec.num_parameters}


def _part_bytes(name: str, count: int, facts: QuantFacts | None, element: int) -> float:
    scheme = facts.scheme(name) if facts else None
    return count * (scheme.bytes_per_weight if scheme else element)


def _embedding_share(spec: ModelSpec, stage: Stage) -> float:
    """Of the embedding group (input and output, or one tied matrix): what this stage holds. With pipeline
    parallelism a tied matrix is held twice, by the first stage and by the last."""
    if stage.first and stage.last:
        return 1.0
    if spec.tie_word_embeddings:
        return 1.0 if stage.first or stage.last else 0.0
    return 0.5 if stage.first or stage.last else 0.0


def _padded_mxfp4_experts(spec: ModelSpec, tp: int, align: tuple[int, int]) -> float:
    """One rank's MXFP4 expert bytes with vLLM's padding (quantization/mxfp4.py create_weights): the
    intermediate size per rank and the hidden size rounded up to the MoE kernel's multiples."""
    intermediate = _round_up((spec.moe_intermediate_size or spec.intermediate_size) // tp, align[0])
    hidden = _round_up(spec.hidden_size, align[1])
    moe_layers = dict(_groups(spec)).get("experts", 0) and spec.num_hidden_layers
    return moe_layers * spec.num_experts * 3 * intermediate * hidden * MXFP4.bytes_per_weight


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
