"""The loads `vllm bench serve` makes: N prompts sent at a request rate (Poisson, or all at once), with at most
`max_concurrency` in flight (a closed loop of that many clients when the rate is infinite)."""

import math
import random
from dataclasses import dataclass

from kvtool.engine.plan.performance.lengths import Lengths
from kvtool.errors import UsageError

DEFAULT_NUM_PROMPTS = 1000  # vllm bench serve --num-prompts
DEFAULT_SEED = 0  # vllm bench serve --seed


@dataclass(frozen=True)
class Load:
    num_prompts: int = DEFAULT_NUM_PROMPTS
    request_rate: float = math.inf  # requests per second
    max_concurrency: int | None = None
    burstiness: float = 1.0  # gamma shape of the gaps between requests: 1 is Poisson
    seed: int = DEFAULT_SEED
    lengths: Lengths = Lengths()

    def __post_init__(self):
        """A load that would never send a request, or never stop sending, is refused (each figure by the
        `vllm bench serve` flag that sets it)."""
        for flag, value, valid in (
            ("--num-prompts", self.num_prompts, self.num_prompts >= 1),
            ("--request-rate", self.request_rate, self.request_rate > 0),
            ("--max-concurrency", self.max_concurrency, self.max_concurrency is None or self.max_concurrency >= 1),
            ("--burstiness", self.burstiness, 0 < self.burstiness < math.inf),
        ):
            if not valid:
                raise UsageError(f"{flag} {value} sends no request.", f"Give {flag} above 0.")

    @property
    def closed_loop(self) -> bool:
        """Clients that each send their next request when the last one ends."""
        return self.max_concurrency is not None and math.isinf(self.request_rate)

    @property
    def label(self) -> str:
        clients = self.max_concurrency
        parts = [f"{clients} client{'s' if clients != 1 else ''}"] if clients else []
        parts += [] if math.isinf(self.request_rate) else [f"{self.request_rate:g}/s"]
        parts += [] if self.lengths.fixed else [f"{self.lengths.name} lengths"]
        return ", ".join(parts) or f"{self.num_prompts} at once"

    def schedule(self) -> list[float]:
        """When each request would be sent if nothing held it back (vllm bench serve's get_request: the
        first at once, then gamma-distributed gaps of mean 1 / rate)."""
        if math.isinf(self.request_rate):
            return [0.0] * self.num_prompts
        rng, scale = random.Random(self.seed), 1.0 / (self.request_rate * self.burstiness)
        times, now = [], 0.0
        for _ in range(self.num_prompts):
            times.append(now)
            now += rng.gammavariate(self.burstiness, scale)
        return times
