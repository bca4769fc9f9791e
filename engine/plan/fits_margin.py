"""How far a plan stands from the line vLLM's start-up draws, and how sure it is: the deciding check's margin at
the point estimate and at both ends of the plan's range. `fits` stays a yes or no; the margin says by how much,
and what share of the range lies on the side `fits` says."""

from dataclasses import dataclass

from kvtool.engine.plan.kv_range import KVRange, binding_cache

KV_CHECKS = ("kv_memory", "one_request")


@dataclass(frozen=True)
class FitsMargin:
    check: str  # the start-up check that decides: the first that fails, else one_request
    needed_bytes: int  # what that check asks for
    bytes: int  # what it has beyond that at the point estimate (negative: what it lacks)
    range_bytes: tuple[int, int]  # the same at the range's two ends
    likelihood: float  # the share of the range on the side `fits` says (1.0: sure)

    @property
    def sure(self) -> bool:
        return self.likelihood >= 1.0

    def to_json(self) -> dict:
        share = self.bytes / self.needed_bytes if self.needed_bytes else None
        return {
            "check": self.check,
            "needed_bytes": self.needed_bytes,
            "bytes": self.bytes,
            "share": None if share is None else round(share, 4),
            "range_bytes": list(self.range_bytes),
            "sure": self.sure,
            "likelihood": round(self.likelihood, 3),
        }


def fits_margin(report, kv: KVRange) -> FitsMargin:
    """The margin of the check that decides the start: a check before the KV cache (free memory, the weights)
    when it fails, else the KV cache against one max_model_len request."""
    failed = report.failed_check
    if failed is not None and failed.name not in KV_CHECKS:
        return _fixed_margin(report, failed.name, kv)
    needed = binding_cache(report).needed_bytes(report.kv.max_model_len)
    have = report.budget.kv_cache_bytes
    return _margin("one_request", needed, have, kv.bytes, report.fits)


def _fixed_margin(report, check: str, kv: KVRange) -> FitsMargin:
    """Checks decided before the KV cache: the weights against free memory (their band from the range's), free
    memory against the requested share, the attention kernel's shared memory (exact)."""
    budget, gpu = report.budget, report.request.gpu
    free = gpu.free_bytes if gpu.free_bytes is not None else gpu.total_bytes
    if check == "weights":
        weights = budget.weights_bytes
        low, high = kv.parts.get("weights_bytes", (weights, weights))
        return _margin(check, weights, free, (free - high + weights, free - low + weights), False)
    if check == "free_memory":
        return _margin(check, budget.requested_bytes, free, (free, free), False)
    return FitsMargin(check, 0, -1, (-1, -1), 1.0)


def _margin(check: str, needed: int, have: int, ends: tuple[int, int], fits: bool) -> FitsMargin:
    low, high = ends[0] - needed, ends[1] - needed
    above = 1.0 if low >= 0 else 0.0 if high < 0 else high / (high - low) if high > low else 1.0
    return FitsMargin(check, needed, have - needed, (low, high), above if fits else 1 - above)
