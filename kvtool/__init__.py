"""kvtool: plan, serve, benchmark and diagnose LLM serving limits."""

import os
import sys
from pathlib import Path

__version__ = "0.1.0"


def _hide_source_tree_root() -> None:
    """Take a clone's root off sys.path, where `python -m` or `python -c` run in it put it.

    The root's folders are kvtool's subpackages (`kernels/` is `kvtool.kernels`). Seen from the root
    they would also be top-level packages and shadow installed ones of the same name: transformers
    imports the `kernels` distribution. An installed kvtool sits in site-packages, which has no
    pyproject.toml, and is left alone.
    """
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        return
    sys.path[:] = [entry for entry in sys.path if not _names(entry, root)]


def _names(entry: str, folder: Path) -> bool:
    try:  # "" is the working directory, which may have been deleted
        return Path(entry or os.getcwd()).resolve() == folder
    except OSError:
        return False


_hide_source_tree_root()
