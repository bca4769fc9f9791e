"""How sure a plan is: a band around each estimated part of the memory budget, summed into a range of the KV
cache that vLLM will print, and carried through vLLM's arithmetic into tokens, concurrency and the safe length.

Each band has a mechanism behind its width (docs/plan.md, "How sure"): the readings of the run that no setting
shows (how vLLM was installed, the FlashInfer sampler of NVIDIA's builds, an NVSwitch board or a PCIe card) are
planned both ways and the band spans them; around that, each estimate strays from what vLLM measures by a share
fitted on the real start-up logs (`BandWidths`, benchmarks/kv_range_calibration.py). The parts' extremes add up:
the range is the budget with every part at its band's far end, not a percentage of the answer.
"""

from dataclasses import dataclass, replace

from kvtool.engine.plan.stages import kv_cache_spec, stage_budget
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing import release_rules
from kvtool.engine.sizing.memory_budget import MemoryBudget, nccl_bytes
from kvtool.engine.sizing.units import GiB, MiB

PARTS = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes", "encoder_bytes")


@dataclass(frozen=True)
class BandWidths:
    """How far each estimate strays from vLLM's measurement beyond the readings planned both ways, as a share
    of the estimate (fitted on the logs of tests/plan/startup_logs: docs/plan.md says which)."""

    weights: float = 0.03  # from config shapes (norms, biases, vocab padding left out); 0 from checkpoint headers
    activation: float = 0.3  # the profile's peak: allocator rounding, kernels' workspaces, run-to-run
    cudagraphs: float = 0.6  # vLLM's own estimate moves with the captures it profiles
    encoder: float = 2.0  # the multimodal profile's dummy items (their count and size per processor)
    non_torch: tuple[int, int] = (20 * MiB, 400 * MiB)  # kernels loaded outside torch: 0.02 - 0.33 GiB printed
    run_to_run: float = 0.01  # of the requested memory: two runs of the same flags (0.43 GiB on 24 GB)


FITTED = BandWidths()


@dataclass(frozen=True)
class KVRange:
    """The plan's figures at the two ends of the budget's band (low: every part at its largest)."""

    bytes: tuple[int, int]
    tokens: tuple[int, int]
    max_concurrency: tuple[float, float]
    safe_max_model_len: tuple[int, int]
    parts: dict[str, tuple[int, int]]


def kv_range(report, widths: BandWidths = FITTED) -> KVRange:
    """The range of the report's KV cache: exact where the KV budget was given outright."""
    budget = report.budget
    parts = part_bands(report, widths) if budget.kv_cache_memory_bytes is None else {}
    fixed = budget.non_kv_cache_bytes - sum(getattr(budget, name) for name in parts)
    noise = round(widths.run_to_run * budget.requested_bytes) if parts else 0
    low = budget.requested_bytes - fixed - sum(high for _, high in parts.values()) - noise
    high = budget.requested_bytes - fixed - sum(low for low, _ in parts.values()) + noise
    if not parts:
        low = high = budget.kv_cache_bytes
    return carried(report, (low, high), parts)


def carried(report, kv_bytes: tuple[int, int], parts: dict[str, tuple[int, int]]) -> KVRange:
    """vLLM's arithmetic at both ends of a range of KV bytes."""
    cache = binding_cache(report)
    ends = [cache.plan(value, report.kv.max_model_len) for value in kv_bytes]
    return KVRange(
        bytes=kv_bytes,
        tokens=(ends[0].kv_cache_tokens, ends[1].kv_cache_tokens),
        max_concurrency=(round(ends[0].max_concurrency, 4), round(ends[1].max_concurrency, 4)),
        safe_max_model_len=(ends[0].safe_max_model_len, ends[1].safe_max_model_len),
        parts=parts,
    )


def binding_cache(report) -> KVCacheSpec:
    request = report.request
    return kv_cache_spec(report.spec, request, report.v0, report.max_num_batched_tokens, report.stage)


def part_bands(report, widths: BandWidths = FITTED) -> dict[str, tuple[int, int]]:
    """Each estimated part's band: its values under every reading planned, widened by its share."""
    budgets = [report.budget, *alternative_budgets(report)]
    shares = {
        "weights_bytes": 0.0 if report.spec.checkpoint_dtypes else widths.weights,
        "activation_bytes": widths.activation,
        "cudagraph_bytes": widths.cudagraphs,
        "encoder_bytes": widths.encoder,
    }
    bands = {name: _widened([getattr(b, name) for b in budgets], shares[name]) for name in shares}
    bands["non_torch_bytes"] = _non_torch_band(report, budgets, widths)
    return bands


def _widened(values: list[int], share: float) -> tuple[int, int]:
    return round(min(values) * (1 - min(share, 1))), round(max(values) * (1 + share))


def _non_torch_band(report, budgets: list[MemoryBudget], widths: BandWidths) -> tuple[int, int]:
    """The kernels vLLM loads outside torch (a spread no setting shows), beside NCCL's buffers as each reading
    charges them; a multi-GPU group may talk over the network (Ray across nodes: about 1 GiB more, s-05)."""
    request = report.request
    rules = release_rules.budget_rules(
        request.release, report.v0, request.gpu.arch, request.flashinfer_sampler, request.gpu.nvswitch, request.install
    )
    base = report.budget.non_torch_bytes - nccl_bytes(rules, request.tp, request.pp)
    nccl = [budget.non_torch_bytes - base for budget in budgets]
    floor, ceiling = widths.non_torch
    network = GiB if request.tp * request.pp > 1 else 0
    return min(base, floor) + min(nccl), max(base, ceiling) + max(nccl) + network


def alternative_budgets(report) -> list[MemoryBudget]:
    """The budget under each reading of the run that no setting shows, one flipped at a time."""
    request, release = report.request, report.release
    requests = [replace(request, install="pip" if request.install == "docker" else "docker")]
    if request.flashinfer_sampler is None and release.reached("flashinfer_sampler_opt_in"):
        requests.append(replace(request, flashinfer_sampler=True))
    gpu = request.gpu
    if request.tp > 1 and (gpu.nvswitch or (gpu.arch or "").startswith(("sm90", "sm10"))):
        flipped = [replace(each, nvswitch=not gpu.nvswitch) for each in request.gpus]
        requests.append(replace(request, gpus=flipped))
    return [_budget(report, each) for each in requests]


def _budget(report, request) -> MemoryBudget:
    return stage_budget(
        report.spec, request, report.v0, report.max_num_batched_tokens, report.max_num_seqs, report.stage
    )
