"""The built-in model catalog (`profiles/models.yaml`): HF config facts of widely deployed open models."""

import difflib
import importlib.util
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kvtool.engine.sizing.spec import ModelSpec, spec_from_hf_config

CATALOG_FILE = Path(__file__).resolve().parents[2] / "profiles" / "models.yaml"


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    config: dict
    aliases: tuple[str, ...] = ()
    also: tuple[str, ...] = ()  # other HF ids with the same architecture (base / instruct / date variants)
    local: dict = field(default_factory=dict)  # {package, file}: a file shipped in an installed package

    def names(self) -> tuple[str, ...]:
        return (self.id, self.id.split("/")[-1], *self.also, *(n.split("/")[-1] for n in self.also), *self.aliases)

    def local_file(self) -> Path | None:
        if not self.local:
            return None
        spec = importlib.util.find_spec(self.local["package"])  # importing the package itself may fail
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(spec.submodule_search_locations[0]) / self.local["file"]
        return path if path.is_file() else None

    def spec(self) -> ModelSpec:
        local = self.local_file()
        return spec_from_hf_config(self.config, self.id, str(local) if local else f"catalog:{self.id}")


def load_yaml(path: Path):
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as file:
        return yaml.load(file, Loader=loader)


@lru_cache(maxsize=1)
def entries() -> tuple[CatalogEntry, ...]:
    return tuple(
        CatalogEntry(
            id=item["id"],
            config=item["config"],
            aliases=tuple(item.get("aliases", ())),
            also=tuple(item.get("also", ())),
            local=item.get("local") or {},
        )
        for item in load_yaml(CATALOG_FILE)["models"]
    )


@lru_cache(maxsize=1)
def _index() -> dict[str, CatalogEntry]:
    return {name.lower(): entry for entry in reversed(entries()) for name in entry.names()}


def find(model: str) -> CatalogEntry | None:
    """Match an HF id (any case), its last path part, or a short alias."""
    return _index().get(model.strip().lower())


def suggestions(model: str, n: int = 3) -> list[str]:
    """Catalog ids close to a misspelt name; those with the same numbers (version, size) first."""
    query, index = model.strip().lower(), _index()
    close = difflib.get_close_matches(query, index, n=n * 5, cutoff=0.5)
    close.sort(key=lambda name: _numbers(name) != _numbers(query))  # stable: difflib's order otherwise
    ids = dict.fromkeys(index[name].id for name in close)
    return list(ids)[:n]


def _numbers(name: str) -> list[str]:
    return re.findall(r"\d+", name.rsplit("/", 1)[-1])
