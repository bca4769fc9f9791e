"""What the user named -> a ModelSpec: a path (config.json, model folder, .gguf file), a catalog id or
alias, or else a Hugging Face Hub id."""

from pathlib import Path

from kvtool.engine.discovery.hub import cached_spec, looks_like_repo_id, spec_from_hub
from kvtool.engine.sizing import catalog
from kvtool.engine.sizing.gguf_spec import spec_from_gguf
from kvtool.engine.sizing.spec import ModelSpec, spec_from_config_file
from kvtool.errors import UsageError


def resolve_model_spec(model: str) -> ModelSpec:
    """A catalog id or alias, a config.json, a model folder, a .gguf file, or a Hugging Face Hub id."""
    path = Path(model).expanduser()
    if path.exists():
        return spec_from_path(path)
    entry = catalog.find(model)
    if entry is not None:
        return entry.spec()
    return spec_from_hub(model) if looks_like_repo_id(model) else _unknown_model(model)


def resolve_offline(model: str) -> ModelSpec | None:
    """A model as a log names it, found without the network: a path, a catalog id or alias (also the last
    part of a path, e.g. /models/gemma-3-27b-it), or a Hub id in kvtool's or the HF cache; None if none is."""
    path = Path(model).expanduser()
    if path.exists():
        return spec_from_path(path)
    parts = [part for part in model.split("/") if part]
    for name in dict.fromkeys((model, "/".join(parts[-2:]), parts[-1] if parts else model)):
        entry = catalog.find(name)
        if entry is not None:
            return entry.spec()
    repo_id = "/".join(parts[-2:])
    return cached_spec(repo_id) if looks_like_repo_id(repo_id) else None


def resolve_model_path(model: str) -> Path | None:
    """The local files behind `model`: a path as given, or the file a catalog entry ships with (e.g. smollm2)."""
    path = Path(model).expanduser()
    if path.exists():
        return path
    entry = catalog.find(model)
    return entry.local_file() if entry is not None else None


def spec_from_path(path: Path) -> ModelSpec:
    """A config.json, a model folder (its config.json, else its first .gguf file) or a .gguf file."""
    if path.is_dir():
        if (path / "config.json").is_file():
            return spec_from_config_file(path / "config.json", path.name)
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            return spec_from_gguf(ggufs[0])
        raise UsageError(
            f"{path} holds neither a config.json nor a .gguf file.",
            "Point --model at a model folder, a config.json or a .gguf file.",
        )
    if path.suffix.lower() == ".gguf":
        return spec_from_gguf(path)
    return spec_from_config_file(path)


def _unknown_model(model: str) -> ModelSpec:
    close = catalog.suggestions(model)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    raise UsageError(
        f"unknown model '{model}'.",
        f"{hint}Give a catalog name (kvtool plan --list-models), a config.json, a model folder or a .gguf file.",
    )
