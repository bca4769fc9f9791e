"""Every package folder is listed in pyproject.toml, so that a wheel (not only an editable install) has it."""

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
