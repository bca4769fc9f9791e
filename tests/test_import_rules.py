"""The layers' import rules, read from the source: the arrows between packages point down, never up or sideways.

    cli -> bench, profiles -> server, monitor -> runtime, plan, diagnosis -> startup_log, discovery -> sizing
                                                 runtime -> kernels

A package imports only packages below it, as MAY_IMPORT lists them one by one: `kvtool.__main__` sits
above cli; profiles (workload profiles and catalogs) is read by cli only and reads sizing and discovery;
discovery (Hub and NVML access) and startup_log (the vLLM start-up-log reader) read sizing only; kernels and
sizing import no other package. The top-level modules SHARED (the version, errors, cache folder, client budget) sit below everything: every
package may import them, and they import only each other. Inside runtime, models must not import worker.
Every import counts: absolute, relative, importlib's with a literal name, inside functions or not. No
two modules import each other, however long the loop. sizing, startup_log, plan, diagnosis, discovery,
profiles, monitor and cli import no torch at module level (plan, diagnose and --help stay cheap)."""

import graphlib
from pathlib import Path

import pytest
from import_graph import imports_of, modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "main": "kvtool.__main__",
    "cli": "kvtool.cli",
    "bench": "kvtool.bench",
    "profiles": "kvtool.profiles",
    "server": "kvtool.engine.server",
    "monitor": "kvtool.monitor",
    "runtime": "kvtool.engine.runtime",
    "plan": "kvtool.engine.plan",
    "diagnosis": "kvtool.engine.diagnosis",
    "discovery": "kvtool.engine.discovery",
    "startup_log": "kvtool.engine.startup_log",
    "kernels": "kvtool.kernels",
    "sizing": "kvtool.engine.sizing",
}
SHARED = ("kvtool", "kvtool.engine", "kvtool.errors", "kvtool.cache", "kvtool.budget")
MAY_IMPORT = {
    "main": {"cli"},
    "cli": {
        "bench",
        "profiles",
        "server",
        "monitor",
        "runtime",
        "plan",
        "diagnosis",
        "startup_log",
        "discovery",
        "kernels",
        "sizing",
    },
    "bench": {"server", "monitor", "runtime", "plan", "diagnosis", "kernels", "sizing"},
    "profiles": {"discovery", "sizing"},
    "server": {"runtime", "plan", "diagnosis", "discovery", "kernels", "sizing"},
    "monitor": {"plan", "diagnosis", "sizing"},
    "runtime": {"discovery", "kernels", "sizing"},
    "plan": {"startup_log", "discovery", "sizing"},
    "diagnosis": {"startup_log", "discovery", "sizing"},
    "startup_log": {"sizing"},
    "discovery": {"sizing"},
    "kernels": set(),
    "sizing": set(),
    "shared": set(),
}
NEVER_WITHIN = {"kvtool.engine.runtime.models": ("kvtool.engine.runtime.worker",)}
TORCH_FREE = ("sizing", "startup_log", "plan", "diagnosis", "discovery", "profiles", "monitor", "cli")
HEAVY_MODULES = ("torch", "transformers", "triton")
MODULES = modules(ROOT)
KNOWN = set(MODULES)


def package_of(name: str, module: str | None = None) -> str | None:
    """The package of a module, or of an imported name and the known module it falls in."""
    package = next((package for package, prefix in PACKAGES.items() if _inside(name, prefix)), None)
    return package or ("shared" if (module or name) in SHARED else None)


def _inside(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(files: dict[str, Path], known: set[str] = KNOWN) -> list[str]:
    """`module:line imports name` for each import the rules forbid."""
    problems = []
    for module, path in files.items():
        package = package_of(module)
        allowed = MAY_IMPORT[package] | {package, "shared"}
        forbidden = [name for inner, names in NEVER_WITHIN.items() if _inside(module, inner) for name in names]
        for found in imports_of(module, path, known):
            if not _inside(found.name, "kvtool"):
                continue
            if package_of(found.name, found.module) not in allowed or any(_inside(found.name, f) for f in forbidden):
                problems.append(f"{module}:{found.line} imports {found.name}")
    return problems


def torch_violations(files: dict[str, Path]) -> list[str]:
    return [
        f"{module}:{found.line} imports {found.name} at module level"
        for module, path in files.items()
        for found in imports_of(module, path, KNOWN)
        if found.module_level and found.name.split(".")[0] in HEAVY_MODULES
    ]


def files_of(package: str) -> dict[str, Path]:
    return {module: path for module, path in MODULES.items() if package_of(module) == package}


def test_every_module_sits_in_a_package_of_the_table():
    assert [module for module in MODULES if package_of(module) is None] == []


def test_the_table_points_down():
    graphlib.TopologicalSorter(MAY_IMPORT).prepare()  # CycleError if two packages may import each other


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_each_package_imports_only_the_packages_below_it(package):
    assert violations(files_of(package)) == []


def import_cycle(files: dict[str, Path], known: set[str] = KNOWN) -> list[str]:
    """One loop of modules that import each other (imports inside functions count), or []."""
    graph = {
        module: {found.module for found in imports_of(module, path, known) if found.module in known} - {module}
        for module, path in files.items()
    }
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return err.args[1]
    return []


def test_no_import_cycle_among_modules():
    assert import_cycle(MODULES) == []


@pytest.mark.parametrize("package", TORCH_FREE)
def test_cheap_layers_import_no_torch_at_module_level(package):
    assert torch_violations(files_of(package)) == []


PLANTED = [
    ("kvtool.engine.sizing.planted", "from ..runtime import config\n", "kvtool.engine.runtime.config"),
    (
        "kvtool.engine.sizing.planted",
        "import importlib\n\ndef load():\n    return importlib.import_module('kvtool.engine.runtime.llm')\n",
        "kvtool.engine.runtime.llm",
    ),
    ("kvtool.engine.sizing.planted", "from kvtool.engine.discovery import hub\n", "kvtool.engine.discovery.hub"),
    ("kvtool.engine.sizing.planted", "from ..startup_log import reader\n", "kvtool.engine.startup_log.reader"),
    ("kvtool.engine.startup_log.planted", "from kvtool.engine.plan import planner\n", "kvtool.engine.plan.planner"),
    (
        "kvtool.kernels.planted",
        "from kvtool.engine.server.app import build_app\n",
        "kvtool.engine.server.app.build_app",
    ),
    ("kvtool.monitor.planted", "def later():\n    from kvtool.cli import watch\n", "kvtool.cli.watch"),
    (
        "kvtool.engine.runtime.models.planted",
        "from ..worker.attention import Attention\n",
        "kvtool.engine.runtime.worker.attention.Attention",
    ),
    ("kvtool.engine.plan.planted", "__import__('kvtool.profiles.workload')\n", "kvtool.profiles.workload"),
    (
        "kvtool.engine.diagnosis.planted",
        "from importlib import import_module\n\ndef model(name):\n    return import_module(f'kvtool.engine.runtime.models.{name}')\n",
        "kvtool.engine.runtime.models",
    ),
    ("kvtool.engine.runtime.planted", "from . import config\nfrom kvtool.errors import UsageError\n", None),
]


@pytest.mark.parametrize("module, source, target", PLANTED)
def test_a_planted_import_breaks_the_rules(tmp_path, module, source, target):
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    found = violations({module: planted})
    assert [line.split(" imports ")[1] for line in found] == ([target] if target else [])


def test_a_planted_cycle_and_torch_import_are_found(tmp_path):
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("import torch\n\ndef later():\n    from kvtool.engine.sizing import second\n")
    second.write_text("from . import first\n")
    files = {"kvtool.engine.sizing.first": first, "kvtool.engine.sizing.second": second}
    assert sorted(set(import_cycle(files, KNOWN | set(files)))) == sorted(files)
    assert torch_violations(files) == ["kvtool.engine.sizing.first:1 imports torch at module level"]
