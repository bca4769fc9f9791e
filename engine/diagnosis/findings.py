"""What `kvtool diagnose` reports: findings with the numbers read and computed, and ordered fixes."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvtool.engine.diagnosis.context import LogContext

Number = int | float
EVIDENCE_CHARS = 600
# The categories of memory and length failures (the JSON contract, docs/design.md); others may name other causes.
MEMORY_AND_LENGTH_CATEGORIES = frozenset(
    (
        "request_too_long",
        "max_tokens_default_truncation",
        "kv_cache_too_small_at_startup",
        "no_cache_blocks",
        "gpu_memory_held_by_others",
        "cuda_oom_startup",
        "cuda_oom_runtime",
        "preemption",
        "batched_tokens_lt_model_len",
    )
)


# a client's literal max_tokens (-1, its "no limit") that vLLM's validation refuses: no memory or length failure
NOT_POSITIVE = "max_tokens_not_positive"


class Numbers(dict):
    """A finding's numbers, with where the explainer took each one it knows the source of (`put`): measured,
    derived or estimated (measured.SOURCES). explain() gives the others theirs: a number read from the failure's
    text is measured, one computed from the others derived."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sources: dict[str, str] = {}

    def put(self, name: str, value, source: str):
        self[name], self.sources[name] = value, source
        return value


@dataclass(frozen=True)
class Fix:
    """One change that would avoid the failure; `flag` for the server, `param` for the request."""

    action: str
    flag: str | None = None
    param: str | None = None
    value: str | Number | None = None

    def to_dict(self) -> dict:
        out = {"action": self.action}
        if self.flag:
            out["flag"] = self.flag
        if self.param:
            out["param"] = self.param
        out["value"] = self.value
        return out


@dataclass(frozen=True)
class Alternative:
    """Another cause the text allows: its category, the fact that would confirm it, and its fixes."""

    category: str
    why: str
    fixes: list[Fix]

    def to_dict(self) -> dict:
        return {"category": self.category, "why": self.why, "fixes": [fix.to_dict() for fix in self.fixes]}


@dataclass
class Observation:
    """A recognised line: what matched, where, and the numbers it holds."""

    category: str
    stage: str
    numbers: dict[str, Number]
    evidence: str
    span: tuple[int, int] = (0, 0)
    detail: str | None = None  # text the category needs: a model name, the start-up phase
    count: int = 1
    stage_evidence: str | None = None  # the line that decided the stage, when the message alone does not

    def key(self, merged_by: tuple[str, ...] | None = None) -> tuple:
        """What makes two observations the same failure: all numbers, or only `merged_by` ones."""
        if merged_by is not None:
            return (self.category, *(self.numbers.get(name) for name in merged_by))
        return (self.category, self.detail, tuple(sorted(self.numbers.items())))


@dataclass
class Finding:
    """An explained failure: category, stage, summary, numbers, fixes, evidence (the JSON contract of `--json`)."""

    category: str
    stage: str  # "request" | "startup" | "runtime" | "unknown"
    summary: str
    numbers: dict[str, Number]
    fixes: list[Fix]
    evidence: str
    span: tuple[int, int] = (0, 0)
    notes: list[str] = field(default_factory=list)
    stage_evidence: str | None = None  # the line that decided `stage` (an out-of-memory error's context)
    alternatives: list[Alternative] = field(default_factory=list)  # other causes the text allows, most likely first
    sources: dict[str, str] = field(default_factory=dict)  # number -> measured | derived | estimated | given

    def to_dict(self) -> dict:
        out = {
            "category": self.category,
            "stage": self.stage,
            "summary": self.summary,
            "numbers": self.numbers,
            "sources": self.sources,
            "fixes": [fix.to_dict() for fix in self.fixes],
            "evidence": self.evidence,
            "notes": self.notes,
            "alternatives": [alternative.to_dict() for alternative in self.alternatives],
        }
        if self.stage_evidence is not None:
            out["stage_evidence"] = self.stage_evidence
        return out


@dataclass
class Diagnosis:
    findings: list[Finding]
    context: "LogContext"

    def to_dict(self) -> dict:
        return {"findings": [finding.to_dict() for finding in self.findings]}


def evidence_window(line: str, span: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """The line, or for a long one the stretch around the match; span re-based onto it."""
    if len(line) <= EVIDENCE_CHARS:
        return line, span
    start = max(0, min(span[0] - 100, span[1] - EVIDENCE_CHARS))
    end = min(len(line), max(span[1] + 100, start + EVIDENCE_CHARS))
    return line[start:end], (span[0] - start, span[1] - start)
