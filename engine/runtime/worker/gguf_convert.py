"""A GGUF file turned into an HF folder (config, tokenizer, safetensors) once, then reused.

transformers reads config, tokenizer and chat template from a GGUF and dequantizes its weights,
which takes ~20 s; the converted copy under the kvtool cache loads in ~2 s with identical output.
"""

import hashlib
from pathlib import Path

from kvtool.cache import cache_dir
from kvtool.engine.runtime.models.registry import SUPPORTED_MODEL_TYPES
from kvtool.errors import UsageError


def converted_folder(gguf_path: Path) -> Path:
    """The cached HF folder for this GGUF file, converting it on first use."""
    target = cache_dir() / "models" / f"{gguf_path.stem}-{_fingerprint(gguf_path)}"
    if not (target / "model.safetensors").is_file():
        convert_gguf(gguf_path, target)
    return target


def convert_gguf(gguf_path: Path, target: Path) -> None:
    """Write config.json (without quantization_config), tokenizer files and model.safetensors."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype="float32")
    except (ValueError, KeyError, OSError) as err:
        raise UsageError(
            f"Cannot read {gguf_path} as a GGUF of a supported family: {err}",
            fix=f"Pass a GGUF of a {', '.join(SUPPORTED_MODEL_TYPES)} model, or an HF model folder.",
        ) from err
    _write_folder(target, config, tokenizer, model)


def _write_folder(target: Path, config, tokenizer, model) -> None:
    from safetensors.torch import save_file

    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    config_dict = config.to_dict()
    config_dict.pop("quantization_config", None)
    config.__class__.from_dict(config_dict).save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    state = {
        k: v.contiguous()
        for k, v in model.state_dict().items()
        if not (k == "lm_head.weight" and config.tie_word_embeddings)
    }
    save_file(state, str(partial / "model.safetensors"))
    partial.replace(target) if not target.exists() else _merge_into(partial, target)


def _merge_into(partial: Path, target: Path) -> None:
    for item in partial.iterdir():
        item.replace(target / item.name)
    partial.rmdir()


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    key = f"{path.resolve()}:{stat.st_size}:{int(stat.st_mtime)}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]
