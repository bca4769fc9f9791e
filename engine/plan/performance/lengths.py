"""How a load's prompt and output lengths spread around the workload's IN:OUT: all the same (vllm bench serve's
random dataset), uniform within a range ratio (its --random-range-ratio), exponential about the means (a
conversation dataset such as ShareGPT, whose long answers make a run's tail), or the lengths a run measured."""

import random
from dataclasses import dataclass

from kvtool.errors import UsageError

SPREADS = ("fixed", "uniform", "exponential")
LENGTHS_EXAMPLE = "--lengths exponential (or fixed, uniform:0.5)"


@dataclass(frozen=True)
class Lengths:
    spread: str = "fixed"
    range_ratio: float = 0.0  # uniform: each length drawn within (1 -+ ratio) x its mean
    listed: tuple[tuple[int, int], ...] = ()  # (prompt, output) per request, as a run measured them

    @property
    def fixed(self) -> bool:
        """Every request IN and OUT."""
        return self.spread == "fixed" and not self.listed

    @property
    def name(self) -> str:
        """As --lengths takes it (`listed`: a run's own)."""
        if self.listed:
            return "listed"
        return f"uniform:{self.range_ratio:g}" if self.spread == "uniform" else self.spread

    def draw(
        self, input_tokens: int, output_tokens: int, count: int, max_total: int, seed: int
    ) -> list[tuple[int, int]]:
        """`count` (prompt, output) pairs whose means are about IN and OUT, none longer than `max_total`."""
        if self.listed:
            return [self.listed[i % len(self.listed)] for i in range(count)]
        rng = random.Random(seed)
        return [_fit(self._one(rng, input_tokens), self._one(rng, output_tokens), max_total) for _ in range(count)]

    def _one(self, rng: random.Random, mean: int) -> int:
        if self.spread == "exponential":
            return round(rng.expovariate(1 / mean))
        if self.spread == "uniform":
            return rng.randint(int(mean * (1 - self.range_ratio)), int(mean * (1 + self.range_ratio)))
        return mean


def _fit(prompt: int, output: int, max_total: int) -> tuple[int, int]:
    """At least one token each; a pair longer than max_model_len loses output first (vLLM refuses it whole)."""
    prompt = min(max(prompt, 1), max_total - 1)
    return prompt, min(max(output, 1), max_total - prompt)


def parse_lengths(text: str | None) -> Lengths:
    """`fixed`, `exponential` or `uniform:R` (0 <= R < 1)."""
    if text is None:
        return Lengths()
    spread, _, ratio = text.strip().lower().partition(":")
    try:
        value = float(ratio) if ratio else 0.0
    except ValueError:
        value = -1.0
    if spread not in SPREADS or not 0 <= value < 1 or (ratio and spread != "uniform"):
        raise UsageError(
            f"--lengths '{text}' is not one of {', '.join(SPREADS)} (uniform:R with 0 <= R < 1).",
            f"Use e.g. {LENGTHS_EXAMPLE}.",
        )
    return Lengths(spread, value)
