"""`--sweep max-concurrency=1,8,32`: one benchmark per value of one load parameter."""

import math
from dataclasses import dataclass, replace

from kvtool.bench.runner import BenchConfig
from kvtool.errors import UsageError

# flag name -> (BenchConfig field, value parser)
SWEEPABLE = {
    "max-concurrency": ("max_concurrency", int),
    "request-rate": ("request_rate", float),
    "max-tokens": ("max_tokens", int),
}


@dataclass(frozen=True)
class Sweep:
    parameter: str  # the flag name, e.g. "max-concurrency"; "" for a single run
    values: tuple[float, ...]

    def labels(self) -> list[str]:
        return [f"{self.parameter}={v:g}" if self.parameter else "" for v in self.values]

    def point_fields(self) -> list[dict]:
        """What distinguishes each point in files: {"max-concurrency": 8}, or {} for a single run."""
        return [{self.parameter: v} if self.parameter else {} for v in self.values]

    def configs(self, base: BenchConfig) -> list[BenchConfig]:
        """One config per value. Each point gets fresh prompts (seed + i), so a later point
        does not find the earlier points' prompts in the server's prefix cache."""
        if not self.parameter:
            return [base]
        name = SWEEPABLE[self.parameter][0]
        return [
            replace(base, **{name: value}, dataset=replace(base.dataset, seed=base.dataset.seed + i))
            for i, value in enumerate(self.values)
        ]


def parse_sweep(text: str) -> Sweep:
    parameter, _, values = text.partition("=")
    parameter = parameter.strip().lstrip("-").replace("_", "-")
    if parameter not in SWEEPABLE or not values:
        raise UsageError(
            f"cannot read --sweep '{text}'", fix=f"Use NAME=V1,V2,... with NAME one of {', '.join(SWEEPABLE)}."
        )
    convert = SWEEPABLE[parameter][1]
    try:
        parsed = tuple(convert(v) for v in values.split(",") if v.strip())
    except ValueError:
        raise UsageError(
            f"cannot read the values in --sweep '{text}'",
            fix="Use numbers, e.g. max-concurrency=1,8,32 or request-rate=1,4,inf.",
        ) from None
    if not parsed or any(v <= 0 or (math.isinf(v) and convert is int) for v in parsed):
        raise UsageError(f"--sweep values must be > 0, got '{values}'.")
    return Sweep(parameter, parsed)


def single_run() -> Sweep:
    return Sweep("", (0,))
