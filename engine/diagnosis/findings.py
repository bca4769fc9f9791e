"""What `kvtool diagnose` reports: findings with the numbers read and computed, and ordered fixes."""

from dataclasses import dataclass, field

Number = int | float


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


@dataclass
class Finding:
    """An explained failure (design.md JSON contract)."""

    category: str
    stage: str  # "request" | "startup" | "runtime"
    summary: str
    numbers: dict[str, Number]
    fixes: list[Fix]
    evidence: str
    span: tuple[int, int] = (0, 0)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "category": self.category,
            "stage": self.stage,
            "summary": self.summary,
            "numbers": self.numbers,
            "fixes": [fix.to_dict() for fix in self.fixes],
            "evidence": self.evidence,
            "notes": self.notes,
        }
