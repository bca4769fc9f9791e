"""Every import in kvtool's source, read with `ast` and resolved to the module it loads.

Absolute imports, relative ones (`from ..runtime import config`, against the file's own package), and
`importlib.import_module(...)` / `__import__(...)` with a literal name (of an f-string, its literal head).
Folders map to packages as pyproject's [tool.setuptools.package-dir] says (`engine` is `kvtool.engine`).
"""

import ast
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
DYNAMIC_IMPORTS = ("import_module", "__import__")


@dataclass(frozen=True)
class Import:
    line: int
    name: str  # as written, made absolute: a module, or a module and a name in it
    module: str  # the longest known module `name` starts with (`name` when none is known)
    module_level: bool  # runs when the importing module loads, not inside a function


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the distribution."""
    package_dirs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found = {}
    for package, folder in package_dirs.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    """The imports of one module, each resolved to the longest name in `known` that it starts with."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, in_function in _nodes(ast.parse(path.read_text(), str(path))):
        for name in _names(node, package):
            found.append(Import(node.lineno, name, _owner(name, known), not in_function))
    return found


def _nodes(tree: ast.AST, in_function: bool = False):
    for child in ast.iter_child_nodes(tree):
        yield child, in_function
        yield from _nodes(child, in_function or isinstance(child, FUNCTIONS))


def _names(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _absolute(node.module or "", node.level, package)
        return [base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call) and _called_name(node.func) in DYNAMIC_IMPORTS and node.args:
        literal = _literal_head(node.args[0])
        if literal:
            dots = len(literal) - len(literal.lstrip("."))
            return [_absolute(literal[dots:], dots, package)]
    return []


def _called_name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _literal_head(arg: ast.expr) -> str | None:
    """ "kvtool.x" -> kvtool.x; f"kvtool.engine.{name}" -> kvtool.engine; anything else -> None."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rsplit(".", 1)[0] or None
    return None


def _absolute(name: str, level: int, package: str) -> str:
    if level == 0:
        return name
    base = package.split(".")[: len(package.split(".")) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _owner(name: str, known: set[str]) -> str:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return name
