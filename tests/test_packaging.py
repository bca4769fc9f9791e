"""The package folders: each listed in pyproject.toml, none importable as a top-level package, and importing
kvtool changes nothing in the program that imports it."""

import importlib.util
import os
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


def _origin(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    return spec.origin if spec else None


def test_importing_kvtool_leaves_sys_path_as_it_was():
    """From the clone's root, where `python -c` puts the root first on sys.path: kvtool changes nothing there."""
    probe = "import sys; before = list(sys.path); import kvtool, kvtool.cli.app; print(sys.path == before)"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.stdout.strip() == "True", run.stderr


def test_under_the_readme_test_command_kernels_is_the_installed_package():
    """pytest's own script puts no working directory on sys.path (importlib mode adds no root either), so
    `kernels`, which transformers imports, is the distribution (or absent), never the clone's kernels/."""
    assert not any(_is_root(entry) for entry in sys.path)
    origin = _origin("kernels")
    assert origin is None or not origin.startswith(str(ROOT / "kernels")), origin


RUN_AS_MAIN = """
import importlib.util, runpy, sys
sys.argv = ["kvtool", "--version"]
try:
    runpy.run_module("kvtool", run_name="__main__")
except SystemExit:
    pass
spec = importlib.util.find_spec("kernels")
print(spec.origin if spec else None)
"""


def test_python_m_kvtool_from_the_clone_sees_the_installed_kernels_package():
    """`python -m kvtool` run in the clone's root starts as the console script does: without the working
    directory on sys.path, where the root's kernels/ would stand in for the `kernels` package."""
    run = subprocess.run([sys.executable, "-c", RUN_AS_MAIN], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "kvtool 0.1.0" in run.stdout
    origin = run.stdout.strip().splitlines()[-1]
    assert origin == "None" or not origin.startswith(str(ROOT / "kernels")), origin


def _is_root(entry: str) -> bool:
    try:  # "" is the working directory
        return Path(entry or os.getcwd()).resolve() == ROOT
    except OSError:
        return False


def test_kvtool_imports_from_a_deleted_working_directory(tmp_path):
    """A shell left in a removed folder still runs kvtool (sys.path's "" names no folder there)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    probe = f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); import kvtool; print('imported')"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "imported", run.stderr
