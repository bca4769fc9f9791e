"""When each request is sent: all at once (rate inf), Poisson arrivals, or gamma arrivals (bursty)."""

import math
import random


def arrival_times(num_requests: int, request_rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Send times in seconds from the start of the run.

    Gaps between requests are drawn from a gamma distribution with shape `burstiness` and mean
    1 / request_rate: burstiness 1 is a Poisson process, below 1 burstier, above 1 more even.
    """
    if request_rate <= 0 or burstiness <= 0:
        raise ValueError("request_rate and burstiness must be > 0")
    if math.isinf(request_rate):
        return [0.0] * num_requests
    rng = random.Random(seed)
    scale = 1.0 / (request_rate * burstiness)
    times, now = [], 0.0
    for _ in range(num_requests):
        times.append(now)
        now += rng.gammavariate(burstiness, scale)
    return times
