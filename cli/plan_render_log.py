"""What `kvtool plan --from-log` adds to the table: where each figure comes from, and what changed."""

from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import CATALOG, DERIVED, ESTIMATED, GIVEN, MEASURED

SOURCES = {MEASURED: "log", DERIVED: "log, derived", ESTIMATED: "est.", GIVEN: "given", CATALOG: "from the catalog"}
LISTED = (MEASURED, DERIVED, ESTIMATED)  # the others say where the GPU's memory came from


def source_label(facts, name: str) -> str:
    source = facts.sources.get(name)
    return SOURCES[source] if source else "not charged"


def from_log_lines(facts, parts: dict[str, str]) -> list[str]:
    """Where the figures come from and what changed, one line each; then what to know about the log."""
    lines = [f"[bold]from the log[/] {facts.source} ({_release(facts.log)}): {_provenance(facts, parts)}"]
    if facts.changed:
        changed = ", ".join(f"{name} {_setting(old)} -> {_setting(new)}" for name, (old, new) in facts.changed.items())
        moved = ", ".join(f"{parts[name]} {size / GiB:+.2f} GiB" for name, size in facts.moved.items())
        lines.append(f"[bold]what if[/] {changed}" + (f"; moved {moved}" if moved else ""))
    return lines + [f"[yellow]note:[/] {note}" for note in facts.notes]


def _release(log) -> str:
    ranks = f", {log.num_ranks} ranks" if (log.num_ranks or 1) > 1 else ""
    return f"vLLM {log.vllm_version or '?'} {log.engine or ''}{ranks}"


def _provenance(facts, parts: dict[str, str]) -> str:
    """`measured weights, KV cache; derived activation peak; estimated non-torch; GPU memory given (A100-80GB)`."""
    sources = facts.measured.sources
    kinds = {kind: [parts[name] for name, source in sources.items() if source == kind] for kind in LISTED}
    said = "; ".join(f"{kind} {', '.join(names)}" for kind, names in kinds.items() if names)
    gpu = sources["total_bytes"]
    return said + ("" if gpu in LISTED else f"; GPU memory {SOURCES[gpu]} ({facts.gpu_name})")


def _setting(value) -> str:
    return f"{value / GiB:.2f} GiB" if isinstance(value, int) and value >= GiB else str(value)
