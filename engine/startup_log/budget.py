"""The memory budget of the run a vLLM start-up log shows: each part as the log printed it, solved from vLLM's
budget, or estimated where the log says neither.

vLLM sizes the KV cache as  ceil(total x gpu_memory_utilization) = weights + activation peak + non-torch memory
+ CUDA graphs (where the release subtracts them) + KV cache.  A log prints some of these, release by release
(lines.py). `log_budget()` keeps every printed one, takes the estimate for the others, and solves
the budget for what is left: the GPU's memory when the log prints neither it nor a GPU kvtool knows, else the
activation peak (which then also holds whatever vLLM measured and the log does not name). A log that prints no
KV cache gets the estimate's. `kvtool plan --from-log` moves this budget to other settings; diagnose can size
its fixes on it.
"""

import math
import re
from dataclasses import dataclass, replace

from kvtool.engine.sizing.gpus import GpuInfo, find_gpu, with_free_memory
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.memory_budget import MemoryBudget
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.reader import VllmStartupLog
from kvtool.errors import UsageError

MEASURED, DERIVED, ESTIMATED = "measured", "derived", "estimated"
GIVEN, CATALOG = "given", "catalog"  # where the GPU's memory came from when the log does not print it
PARTS = (
    "weights_bytes",
    "activation_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "encoder_bytes",
    "other_process_bytes",
)
ROUNDING = 0.03 * GiB  # what the log's two-decimal figures may miss together
NEEDS_A_GPU = "The log prints neither its GPU's memory nor its KV cache, and names no GPU kvtool knows."
GIVE_A_GPU = "Give the GPU it ran on with --gpu (e.g. --gpu A100-80GB) or --gpu-mem (e.g. --gpu-mem 79.2GiB)."


@dataclass(frozen=True)
class LogBudget:
    """The budget of the log's run, at its own settings, and where each figure comes from."""

    budget: MemoryBudget  # its kv_cache_bytes is the log's KV cache
    sources: dict[str, str]  # "total_bytes", each part in PARTS that counts, "kv_cache_bytes" -> MEASURED ...

    def figures(self, source: str) -> dict[str, int]:
        """The figures of one source, in bytes, by MemoryBudget's names."""
        return {name: self.value(name) for name, kind in self.sources.items() if kind == source}

    def value(self, name: str) -> int:
        return getattr(self.budget, name)


def log_gpu(log: VllmStartupLog) -> GpuInfo | None:
    """The GPU the log ran on as far as it says: the memory it printed (named after its device), else the
    catalog's GPU of the device it names; None when it says neither."""
    memory, failure = log.memory, log.failure
    total = memory.total_gpu_memory_gib or (failure and failure.total_gpu_memory_gib)
    utilization = log.gpu_memory_utilization or (failure and failure.gpu_memory_utilization)
    requested = memory.requested_memory_gib or (failure and failure.requested_memory_gib)
    if not total and requested and utilization:
        total = requested / utilization
    named = catalog_gpu(log.device_name) if log.device_name else None
    if not total:
        return named and replace(named, source=CATALOG)
    free = memory.free_gpu_memory_gib or (failure and failure.free_gpu_memory_gib)
    gpu = GpuInfo(
        name=log.device_name or (named.name if named else f"{total:.2f} GiB GPU"),
        total_bytes=round(total * GiB),
        source="log",
        arch=named.arch if named else None,
    )
    return with_free_memory([gpu], round(free * GiB))[0] if free else gpu


def catalog_gpu(device_name: str) -> GpuInfo | None:
    """The catalog's GPU for a device name as CUDA prints it ("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX
    3090"): the longest run of its words the catalog knows, hyphenated or run together; MIG slices none."""
    words = [word for word in re.split(r"[\s_-]+", device_name.lower()) if word and word != "nvidia"]
    if "mig" in words:
        return None
    runs = [words[start : start + size] for size in range(len(words), 0, -1) for start in range(len(words) - size + 1)]
    for run in runs:
        for name in dict.fromkeys(("-".join(run), "".join(run))):
            try:
                return find_gpu(name)
            except UsageError:
                continue
    return None


def log_budget(
    log: VllmStartupLog, estimate: MemoryBudget, cache: KVCacheSpec, max_model_len: int, total_source: str | None
) -> LogBudget:
    """The log's budget: `estimate` is the estimator's at the log's settings on the GPU it ran on (its memory
    `total_source`, or None when unknown: then solved from the log), `cache` its KV cache at those settings."""
    printed = printed_parts(log, estimate)
    parts = {name: printed.get(name, getattr(estimate, name)) for name in PARTS}
    sources = {name: MEASURED if name in printed else ESTIMATED for name in PARTS if parts[name]}
    kv = log_kv_bytes(log, cache, max_model_len)
    budget = replace(estimate, **parts)
    if estimate.kv_cache_memory_bytes is not None:  # given outright: vLLM did not profile
        return LogBudget(budget, {**sources, "total_bytes": total_source or ESTIMATED, "kv_cache_bytes": MEASURED})
    if kv is None and total_source is None:
        raise UsageError(NEEDS_A_GPU, GIVE_A_GPU)
    if kv is None:
        return LogBudget(budget, {**sources, "total_bytes": total_source, "kv_cache_bytes": ESTIMATED})
    if total_source is None:
        budget = _with_total(budget, _non_kv(parts, log) + kv)
    return _balanced(budget, kv, {**sources, "total_bytes": total_source or DERIVED, "kv_cache_bytes": MEASURED})


def printed_parts(log: VllmStartupLog, estimate: MemoryBudget) -> dict[str, int]:
    """The parts of the budget the log prints, in bytes (the tightest rank's); CUDA graphs where the run
    subtracted them (the estimate charges them), the encoder inside a printed activation peak."""
    memory = log.memory
    weights = memory.weights_memory_gib
    activation = memory.peak_activation_memory_gib
    if activation is None and memory.peak_torch_memory_gib is not None and weights is not None:
        activation = memory.peak_torch_memory_gib - weights  # 0.6.4: the torch peak holds the weights
    non_torch = memory.non_torch_memory_gib
    if non_torch is None and memory.consumed_memory_gib is not None and weights is not None:
        non_torch = memory.consumed_memory_gib - weights  # 0.28+: consumed = weights + non-torch
    graphs = memory.cudagraph_memory_estimate_gib if estimate.cudagraph_bytes else None
    found = {
        "weights_bytes": weights,
        "activation_bytes": activation,
        "non_torch_bytes": non_torch,
        "cudagraph_bytes": graphs,
        "encoder_bytes": 0.0 if activation is not None and estimate.encoder_bytes else None,
    }
    return {name: round(gib * GiB) for name, gib in found.items() if gib is not None}


def log_kv_bytes(log: VllmStartupLog, cache: KVCacheSpec, max_model_len: int) -> int | None:
    """The KV cache of the log's run (its tightest rank): the memory printed, set within the block the printed
    block or token count puts it in; else that block count's memory; None when the log prints neither."""
    memory, failure = log.memory, log.failure
    gib = memory.available_kv_cache_memory_gib
    if gib is None and failure is not None:
        gib = failure.available_kv_cache_memory_gib
    blocks = _printed_blocks(log, cache, max_model_len)
    size = cache.block_bytes
    if gib is None and blocks is None:
        return None
    if gib is None:  # somewhere in the block after the last: its middle (none at all when no block)
        return round((blocks + 0.5) * size) if blocks else 0
    kv = round(gib * GiB)
    if blocks is not None and abs(cache.num_blocks(kv) - blocks) <= max(1, blocks // 100):
        kv = min(max(kv, blocks * size), (blocks + 1) * size - 1)
    return kv


def _printed_blocks(log: VllmStartupLog, cache: KVCacheSpec, max_model_len: int) -> int | None:
    """The log's KV cache in kvtool's blocks: from the tokens it printed (any release's formula, solved by
    bisection), else V0's block count (one block table over all layers, as kvtool counts)."""
    tokens = log.memory.kv_cache_size_tokens
    if tokens is None and log.failure is not None:
        tokens = log.failure.kv_cache_size_tokens
    if tokens is None:
        return log.memory.num_gpu_blocks if log.engine == "V0" else None
    low, high = 0, tokens + 1
    while low < high:  # the fewest blocks whose tokens reach the printed count
        middle = (low + high) // 2
        if cache.plan(middle * cache.block_bytes, max_model_len).kv_cache_tokens >= tokens:
            high = middle
        else:
            low = middle + 1
    return low


def _non_kv(parts: dict[str, int], log: VllmStartupLog) -> int:
    """What the run took before the KV cache: the sum vLLM printed where it did (V1 debug), else the parts'."""
    printed = log.memory.non_kv_cache_memory_gib
    return round(printed * GiB) if printed is not None else sum(parts.values())


def _with_total(budget: MemoryBudget, requested: int) -> MemoryBudget:
    """The budget on the GPU whose share at the log's utilization is `requested`."""
    total = math.ceil(requested / budget.gpu_memory_utilization)
    return replace(budget, total_bytes=total, requested_bytes=requested)


def _balanced(budget: MemoryBudget, kv: int, sources: dict[str, str]) -> LogBudget:
    """The budget whose KV cache is the log's: the parts the log does not print share what its budget leaves
    over (all that vLLM measured beyond the printed parts); where it prints them all, the activation peak
    takes the rounding of its figures."""
    rest = budget.requested_bytes - budget.non_kv_cache_bytes - kv
    unprinted = {name: getattr(budget, name) for name in PARTS if sources.get(name) == ESTIMATED}
    shares = _shares(rest, {name: size for name, size in unprinted.items() if size > 0} or {"activation_bytes": 1})
    budget = replace(budget, **{name: getattr(budget, name) + share for name, share in shares.items()})
    if abs(rest) > ROUNDING:
        sources = {**sources, **dict.fromkeys(shares, DERIVED)}
    return LogBudget(budget, sources)


def _shares(rest: int, weights: dict[str, int]) -> dict[str, int]:
    """`rest` split in the proportion of `weights`, to the byte (the last takes what rounding leaves)."""
    whole, names = sum(weights.values()), list(weights)
    shares = {name: round(rest * weights[name] / whole) for name in names[:-1]}
    return {**shares, names[-1]: rest - sum(shares.values())}
