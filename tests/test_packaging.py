"""The package folders: each listed in pyproject.toml, none importable as a top-level package."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "kvtool": "kvtool",
    "cli": "kvtool.cli",
    "engine": "kvtool.engine",
    "kernels": "kvtool.kernels",
    "profiles": "kvtool.profiles",
    "bench": "kvtool.bench",
    "monitor": "kvtool.monitor",
}


def test_every_package_folder_is_in_pyproject():
    pyproject = (ROOT / "pyproject.toml").read_text()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            name = ".".join((package, *parts))
            assert f'"{name}"' in pyproject, f"{name} is missing from [tool.setuptools] packages"


# Run from the clone's root, as `python -m pytest` and `python -m kvtool` are.
TOP_LEVEL_PROBE = """
import importlib.util, sys
import kvtool
for folder in {folders}:
    spec = importlib.util.find_spec(folder)
    print(folder, spec.origin if spec else None)
"""


def test_folders_do_not_shadow_top_level_packages_once_kvtool_is_imported():
    """transformers imports the `kernels` distribution; the clone's kernels/ must not stand in for it."""
    probe = TOP_LEVEL_PROBE.format(folders=sorted(set(FOLDERS) - {"kvtool"}))
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    for line in run.stdout.splitlines():
        folder, origin = line.split(" ", 1)
        assert not origin.startswith(str(ROOT / folder)), f"{folder} resolves to the clone's folder: {origin}"


def test_kvtool_imports_from_a_deleted_working_directory(tmp_path):
    """A shell left in a removed folder still runs kvtool (sys.path's "" names no folder there)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    probe = f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); import kvtool; print('imported')"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "imported", run.stderr
