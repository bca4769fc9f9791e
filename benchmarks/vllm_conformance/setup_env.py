"""Everything a conformance run needs, made once under a cache folder and reused.

vLLM's release source (the sdist keeps `tests/`), a virtualenv with what the tests import (vLLM's
pure-Python files from the same sdist, none of its compiled extensions), and a Hugging Face cache in
which every model a test names resolves to the files of the model kvtool serves.
"""

import hashlib
import json
import re
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

VLLM_VERSION = "0.33.0"
SIMPLE_INDEX = "https://pypi.org/simple/vllm/"
UNPACKED = ("tests/", "vllm/", "examples/", "pyproject.toml", "requirements/")
TORCH = "torch==2.13.0"
# The client libraries and test runners, at the versions vLLM's CI locks.
CI_PINNED = (
    "openai",
    "anthropic",
    "httpx",
    "pytest",
    "pytest-asyncio",
    "pytest-timeout",
    "schemathesis",
    "hypothesis",
    "tblib",
)
HERE = Path(__file__).resolve().parent
HUB_ID = re.compile(r'"([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"')
MODEL_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
    "model.safetensors",
)


def sdist_entry() -> dict:
    request = urllib.request.Request(SIMPLE_INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    name = f"vllm-{VLLM_VERSION}.tar.gz"
    return next(f for f in files if f["filename"] == name)


def fetch_sdist(cache: Path) -> Path:
    """vLLM's source tree, unpacked once: the tests and the Python package."""
    source = cache / "src" / f"vllm-{VLLM_VERSION}"
    if (source / "tests" / "utils.py").exists():
        return source
    entry = sdist_entry()
    archive = cache / entry["filename"]
    if not archive.exists():
        print(f"downloading {entry['url']}", flush=True)
        urllib.request.urlretrieve(entry["url"], archive)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != entry["hashes"]["sha256"]:
        archive.unlink()
        sys.exit(f"{archive.name}: sha256 {digest} is not PyPI's; deleted, run again")
    prefix = f"vllm-{VLLM_VERSION}/"
    with tarfile.open(archive) as sdist:
        wanted = [m for m in sdist.getmembers() if m.name.removeprefix(prefix).startswith(UNPACKED)]
        sdist.extractall(cache / "src", members=wanted, filter="data")
    return source


def ci_pins(source: Path) -> list[str]:
    lock = (source / "requirements" / "test" / "cuda.txt").read_text().splitlines()
    return [line for line in lock if line.split("==")[0] in CI_PINNED and "==" in line]


def make_venv(cache: Path, source: Path) -> Path:
    """A virtualenv of its own (never the repository's .venv); rebuilt when the requirements change."""
    venv = cache / "venv"
    python = venv / "bin" / "python"
    wanted = (HERE / "requirements.txt").read_text() + "\n".join(ci_pins(source))
    stamp = venv / "kvtool-requirements.txt"
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = cache / "ci-pins.txt"
    pins.write_text("\n".join(ci_pins(source)) + "\n")
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, "-r", str(HERE / "requirements.txt")], check=True)
    subprocess.run([*pip, "-r", str(pins)], check=True)
    stamp.write_text(wanted)
    return python


def model_ids(source: Path) -> set[str]:
    """Every quoted `org/name` in the tests run: the models they name (and a few harmless others)."""
    ids = set()
    for folder in ("tests/entrypoints", "tests/tool_use"):
        for test_file in (source / folder).rglob("*.py"):
            ids.update(HUB_ID.findall(test_file.read_text()))
    return {i for i in ids if not i.startswith(("examples/", "v1/")) and "." not in i.split("/")[0]}


def fake_hub(cache: Path, source: Path, model_folder: Path) -> Path:
    """A Hugging Face cache (HF_HOME) where every model the tests name is kvtool's model: its
    tokenizer and config are what the server really uses."""
    home = cache / "hf"
    for repo in sorted(model_ids(source)):
        root = home / "hub" / ("models--" + repo.replace("/", "--"))
        snapshot = root / "snapshots" / "kvtool"
        snapshot.mkdir(parents=True, exist_ok=True)
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text("kvtool")
        for name in MODEL_FILES:
            if (model_folder / name).exists() and not (snapshot / name).exists():
                (snapshot / name).symlink_to(model_folder / name)
    return home


def kvtool_model_folder(kvtool_cache: Path, name: str) -> Path | None:
    folders = sorted(kvtool_cache.glob(f"models/{name}*"))
    return folders[-1] if folders else None
