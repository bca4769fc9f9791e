"""Workload profiles: the engine and request settings for one kind of traffic, read from YAML.

A profile is named after a file shipped in this package (`chat-gateway`) or given as a path to the
user's own YAML file. Keys use vLLM's names, so a profile reads like the flags of `vllm serve`.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.errors import UsageError

PROFILES_DIR = Path(__file__).parent
CATALOG_FILES = {"models", "gpus"}  # data catalogs that live beside the profiles


@dataclass(frozen=True)
class WorkloadProfile:
    name: str
    description: str
    max_model_len: int
    max_tokens: int  # default request max_tokens when a request omits it
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = defaults.SMALL_GPU_SCHEDULER_LIMITS["server"][1]
    max_num_batched_tokens: int = defaults.DEFAULT_MAX_NUM_BATCHED_TOKENS
    gpu_memory_utilization: float = defaults.DEFAULT_GPU_MEMORY_UTILIZATION
    tensor_parallel_size: int = 1
    overflow: str = defaults.DEFAULT_OVERFLOW
    hardware: str = ""
    gpu_memory_gib: int | None = None
    num_gpus: int = 1
    model: str | None = None
    source: str = ""  # the file it was read from

    def engine_args(self) -> EngineArgs:
        """The profile's engine settings as EngineArgs; the others are not given."""
        return EngineArgs(
            model=self.model,
            max_model_len=self.max_model_len,
            kv_cache_dtype=self.kv_cache_dtype,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            gpu_memory_utilization=self.gpu_memory_utilization,
            tensor_parallel_size=self.tensor_parallel_size,
            overflow=self.overflow,
        )


_REQUIRED = ("description", "max_model_len", "max_tokens")
_FIELD_TYPES = {
    "name": str,
    "description": str,
    "hardware": str,
    "model": str,
    "kv_cache_dtype": str,
    "overflow": str,
    "max_model_len": int,
    "max_tokens": int,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "tensor_parallel_size": int,
    "gpu_memory_gib": int,
    "num_gpus": int,
    "gpu_memory_utilization": float,
}

_KINDS = {int: ("an integer", "4096"), float: ("a number", "0.9"), str: ("text", "some words")}


def profile_names() -> list[str]:
    """The names of the profiles shipped with kvtool, sorted."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml") if p.stem not in CATALOG_FILES)


def list_profiles() -> list[WorkloadProfile]:
    return [load_profile(name) for name in profile_names()]


def load_profile(name_or_path: str) -> WorkloadProfile:
    """Read a shipped profile by name, or the user's YAML file by path."""
    path = _find_profile_file(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UsageError(f"Profile file {path} is not valid YAML: {_one_line(err)}.", "Fix the YAML syntax.") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"Profile file {path} must hold a mapping of settings, like the shipped profiles.",
            "See `kvtool profiles show chat-gateway --format yaml` for an example.",
        )
    return profile_from_dict(data, name=data.get("name") or path.stem, source=str(path))


def profile_from_dict(data: dict, name: str, source: str = "") -> WorkloadProfile:
    where = f"profile {name!r}"
    _check_keys(data, where)
    values = {key: _typed(key, value, where) for key, value in data.items() if key != "name"}
    profile = WorkloadProfile(name=name, source=source, **values)
    _check_ranges(profile, where)
    return profile


def profile_to_dict(profile: WorkloadProfile) -> dict:
    """The profile as YAML-ready settings (without its name and source)."""
    data = dataclasses.asdict(profile)
    return {key: value for key, value in data.items() if key not in ("name", "source") and value is not None}


def _find_profile_file(name_or_path: str) -> Path:
    if name_or_path in profile_names():
        return PROFILES_DIR / f"{name_or_path}.yaml"
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        raise UsageError(f"Profile file {name_or_path} does not exist.", "Check the path.")
    close = difflib.get_close_matches(name_or_path, profile_names(), n=1)
    hint = f"Did you mean {close[0]!r}? " if close else ""
    raise UsageError(
        f"Unknown profile {name_or_path!r}.",
        f"{hint}Choose one of: {', '.join(profile_names())}, or give a path to a YAML file.",
    )


def _check_keys(data: dict, where: str) -> None:
    known = set(_FIELD_TYPES)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(sorted(known))}."
            raise UsageError(f"Unknown key {key!r} in {where}.", hint)
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise UsageError(f"The {where} lacks {', '.join(missing)}.", "Add the missing key(s) to the YAML file.")


def _typed(key: str, value, where: str):
    kind = _FIELD_TYPES[key]
    if value is None and key in ("model", "gpu_memory_gib"):
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        what, example = _KINDS[kind]
        raise UsageError(f"{key} in {where} must be {what}, not {value!r}.", f"Write e.g. `{key}: {example}`.")
    return value


def _check_ranges(p: WorkloadProfile, where: str) -> None:
    for key in (
        "max_model_len",
        "max_tokens",
        "max_num_seqs",
        "max_num_batched_tokens",
        "tensor_parallel_size",
        "num_gpus",
    ):
        if getattr(p, key) < 1:
            raise UsageError(f"{key} in {where} must be at least 1, not {getattr(p, key)}.")
    if not 0 < p.gpu_memory_utilization <= 1:
        raise UsageError(
            f"gpu_memory_utilization in {where} must be in (0, 1], not {p.gpu_memory_utilization}.",
            "Write a fraction of GPU memory, e.g. 0.9.",
        )
    if p.kv_cache_dtype not in defaults.KV_CACHE_DTYPES:
        raise UsageError(
            f"kv_cache_dtype {p.kv_cache_dtype!r} in {where} is not supported.",
            f"Choose one of: {', '.join(defaults.KV_CACHE_DTYPES)}.",
        )
    if p.overflow not in defaults.OVERFLOW_POLICIES:
        raise UsageError(f"overflow {p.overflow!r} in {where} is not a policy.", "Choose reject or clamp.")
    if p.max_tokens > p.max_model_len:
        raise UsageError(
            f"max_tokens ({p.max_tokens}) in {where} is larger than max_model_len ({p.max_model_len}).",
            "Lower max_tokens or raise max_model_len.",
        )
    if p.max_num_batched_tokens < p.max_num_seqs:
        raise UsageError(
            f"max_num_batched_tokens ({p.max_num_batched_tokens}) must be greater than or equal to "
            f"max_num_seqs ({p.max_num_seqs}) in {where}.",
            "Raise max_num_batched_tokens.",
        )


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())
