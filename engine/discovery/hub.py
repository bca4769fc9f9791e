"""A Hugging Face Hub model id -> ModelSpec, through huggingface_hub: config.json, and the safetensors headers
for the exact element count of every dtype in the checkpoint.

HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and the HF cache are honoured (read at call time). What a lookup
learnt is kept in kvtool's cache folder, so that a later `plan` answers without importing the Hub client:
offline, or online while the facts are younger than HUB_FACTS_FRESH_SECONDS (then the Hub is asked for the
current revision again, and the facts are read anew when it moved).
"""

import json
import os
import time
from dataclasses import replace
from pathlib import Path

from kvtool.cache import cache_dir
from kvtool.engine.sizing import catalog
from kvtool.engine.sizing.defaults import HUB_FACTS_FRESH_SECONDS
from kvtool.engine.sizing.quantization import FLOAT_DTYPES
from kvtool.engine.sizing.spec import ModelSpec, spec_from_hf_config
from kvtool.errors import UsageError

DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_VALUES = ("1", "on", "yes", "true")


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in OFFLINE_VALUES


def looks_like_repo_id(model: str) -> bool:
    parts = model.split("/")
    return len(parts) == 2 and all(parts) and not model.startswith((".", "/", "~"))


def spec_from_hub(repo_id: str) -> ModelSpec:
    """A Hub model id: its config.json, and its safetensors element counts per dtype when it has them."""
    return _spec(repo_id, hub_facts(repo_id))


def cached_spec(repo_id: str) -> ModelSpec | None:
    """A Hub model from kvtool's cache or the HF cache, never the network; None when neither holds it."""
    facts = _read_facts(repo_id)
    if facts is None:
        try:
            facts = _facts_from_hf_cache(repo_id)
        except (UsageError, OSError, ValueError):
            return None
    return _spec(repo_id, facts)


def _spec(repo_id: str, facts: dict) -> ModelSpec:
    if not isinstance(facts.get("config"), dict):
        raise UsageError(f"config.json of '{repo_id}' holds no JSON object.", "Give a local config.json with --model.")
    spec = spec_from_hf_config(facts["config"], repo_id, f"hub:{repo_id}@{str(facts.get('revision'))[:12]}")
    counts = facts.get("dtype_counts")
    if not counts:
        return spec
    if set(counts) <= FLOAT_DTYPES:  # unquantized: the headers give the exact parameter count
        spec = replace(spec, num_parameters=sum(counts.values()))
    return replace(spec, checkpoint_dtypes=tuple(sorted(counts.items())))


def hub_facts(repo_id: str) -> dict:
    """{"config": ..., "dtype_counts": ... or None, "revision": ...} for a Hub model id."""
    cached = _read_facts(repo_id)
    if offline():
        return cached or _facts_from_hf_cache(repo_id)
    if cached and _age_seconds(_facts_file(repo_id)) < HUB_FACTS_FRESH_SECONDS:
        return cached
    from huggingface_hub import HfApi

    path = _download_config(repo_id)
    revision = Path(path).parent.name  # the snapshot folder is the commit hash
    if cached and cached.get("revision") == revision:
        _write_facts(repo_id, cached)  # fresh again for a day
        return cached
    counts = None
    try:
        counts = dict(HfApi(endpoint=endpoint()).get_safetensors_metadata(repo_id, revision=revision).parameter_count)
    except Exception:  # not a safetensors repo, or headers unreadable: weights then come from the config
        counts = None
    facts = {"config": json.loads(Path(path).read_text()), "dtype_counts": counts, "revision": revision}
    _write_facts(repo_id, facts)
    return facts


def _download_config(repo_id: str) -> str:
    """config.json through the HF cache; one HEAD without retries first, so that an unreachable Hub
    answers at once (from the cache when it holds the file)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url, try_to_load_from_cache
    from huggingface_hub.utils import disable_progress_bars, logging

    logging.set_verbosity_error()
    disable_progress_bars()
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json", endpoint=endpoint()))
        return hf_hub_download(repo_id, "config.json", endpoint=endpoint(), cache_dir=_hf_cache())
    except Exception as err:  # every failure of the Hub client becomes one line
        cached = try_to_load_from_cache(repo_id, "config.json", cache_dir=_hf_cache())
        if isinstance(cached, str) and _unreachable(err):
            return cached
        raise _hub_error(repo_id, err) from None


def _unreachable(err: Exception) -> bool:
    kind = type(err).__name__
    return "Connect" in kind or "Timeout" in kind or kind in ("LocalEntryNotFoundError", "OfflineModeIsEnabled")


def _facts_from_hf_cache(repo_id: str) -> dict:
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(repo_id, "config.json", cache_dir=_hf_cache())
    if not isinstance(path, str):
        raise UsageError(
            f"'{repo_id}' is not in the Hugging Face cache and HF_HUB_OFFLINE is set.",
            "Run once without HF_HUB_OFFLINE, or give a local config.json.",
        )
    return {"config": json.loads(Path(path).read_text()), "dtype_counts": None, "revision": Path(path).parent.name}


def _hub_error(repo_id: str, err: Exception) -> UsageError:
    kind = type(err).__name__
    where = endpoint()
    close = catalog.suggestions(repo_id)
    hint = f"Did you mean {', '.join(close)}? " if close else ""
    if kind == "GatedRepoError":
        return UsageError(
            f"'{repo_id}' is gated on {where}.",
            "Accept its licence on the model page and set HF_TOKEN to a token that has access.",
        )
    if kind in ("RepositoryNotFoundError", "RevisionNotFoundError"):
        return UsageError(
            f"unknown model '{repo_id}': not in the catalog and not found on {where}.",
            f"{hint}Check the id, or set HF_TOKEN for a private repo.",
        )
    if kind in ("RemoteEntryNotFoundError", "EntryNotFoundError"):
        return UsageError(f"'{repo_id}' on {where} has no config.json.", "Give a local config.json with --model.")
    if _unreachable(err):
        return UsageError(
            f"cannot reach {where} to read '{repo_id}', and it is not in the cache.",
            f"{hint}Check the network or HF_ENDPOINT, or give a local config.json.",
        )
    return UsageError(f"reading '{repo_id}' from {where} failed ({kind}).", "Check HF_ENDPOINT and HF_TOKEN.")


def _hf_cache() -> str | None:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME") else None


def _facts_file(repo_id: str) -> Path:
    host = endpoint().split("://")[-1].replace("/", "_").replace(":", "_")
    return cache_dir() / "hub" / host / (repo_id.replace("/", "--") + ".json")


def _age_seconds(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def _read_facts(repo_id: str) -> dict | None:
    try:
        return json.loads(_facts_file(repo_id).read_text())
    except (OSError, ValueError):
        return None


def _write_facts(repo_id: str, facts: dict) -> None:
    path = _facts_file(repo_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(facts))
    except OSError:  # a read-only cache only costs speed
        pass
