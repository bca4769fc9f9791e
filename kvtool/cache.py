"""kvtool's cache folder: converted models and the CPU kernels built for this machine live under it."""

import os
from pathlib import Path


def cache_dir() -> Path:
    """$KVTOOL_CACHE_DIR, else ~/.cache/kvtool."""
    return Path(os.environ.get("KVTOOL_CACHE_DIR") or Path.home() / ".cache" / "kvtool")
