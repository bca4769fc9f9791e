"""The layers' import rules, read from the source with `ast`: imports only point down the layer list.

sizing       nothing else in engine
plan         sizing
diagnosis    sizing
runtime      sizing, kernels
server       runtime, sizing
engine/*     never cli or profiles
sizing, plan, diagnosis, cli: no torch at module level (plan, diagnose and --help stay cheap)
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE_LAYERS = {
    "sizing": set(),
    "plan": {"sizing"},
    "diagnosis": {"sizing"},
    "runtime": {"sizing"},
    "server": {"runtime", "sizing"},
}
OUTSIDE_ENGINE_ALLOWED = {"runtime": {"kvtool.kernels"}}
NEVER_FROM_ENGINE = ("kvtool.cli", "kvtool.profiles")
TORCH_FREE = ("engine/sizing", "engine/plan", "engine/diagnosis", "cli", "monitor")
SHARED_TOP_LEVEL = ("kvtool.errors", "kvtool.cache", "kvtool.__version__")  # usable by every layer
HEAVY_MODULES = ("torch", "transformers", "triton")


def imports_of(path: Path, module_level_only: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for every import in a file; with module_level_only, skip function bodies."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    found = []
    for node in _flatten(nodes) if module_level_only else nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at import time: the module body, including `if` / `try` blocks, not functions."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                out += _flatten(getattr(node, block, []))
        elif isinstance(node, ast.ExceptHandler):
            out += _flatten(node.body)
    return out


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def engine_layer_violations(layer: str, files: list[Path]) -> list[str]:
    allowed = ENGINE_LAYERS[layer] | {layer}
    problems = []
    for path in files:
        for module, line in imports_of(path):
            where = f"{path.relative_to(ROOT)}:{line} imports {module}"
            if module.startswith(NEVER_FROM_ENGINE):
                problems.append(where)
            elif module.startswith("kvtool.engine."):
                if module.split(".")[2] not in allowed:
                    problems.append(where)
            elif module.startswith("kvtool.") and not module.startswith(SHARED_TOP_LEVEL):
                if not module.startswith(tuple(OUTSIDE_ENGINE_ALLOWED.get(layer, ()))):
                    problems.append(where)
    return problems


def torch_violations(files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module} at module level"
        for path in files
        for module, line in imports_of(path, module_level_only=True)
        if module.split(".")[0] in HEAVY_MODULES
    ]


@pytest.mark.parametrize("layer", sorted(ENGINE_LAYERS))
def test_each_engine_layer_imports_only_the_layers_below_it(layer):
    assert engine_layer_violations(layer, python_files(f"engine/{layer}")) == []


@pytest.mark.parametrize("folder", TORCH_FREE)
def test_cheap_layers_import_no_torch_at_module_level(folder):
    assert torch_violations(python_files(folder)) == []


def test_the_rules_catch_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch\nfrom kvtool.engine.runtime.config import EngineConfig\nfrom kvtool.cli import app\n\n"
        "def later():\n    import torch\n"
    )
    (tmp_path / "ok.py").write_text("from kvtool.engine.sizing import defaults\n")
    files = sorted(tmp_path.glob("*.py"))
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert len(engine_layer_violations("sizing", files)) == 2  # runtime and cli
        assert engine_layer_violations("runtime", files) == ["bad.py:3 imports kvtool.cli.app"]
        assert torch_violations(files) == ["bad.py:1 imports torch at module level"]
    finally:
        ROOT = saved
