"""How sure a plan is: a band around each estimated part of the memory budget, summed into a range of the KV
cache that vLLM will print, and carried through vLLM's arithmetic into tokens, concurrency and the safe length.

Each band has a mechanism behind its width (docs/plan.md, "How sure a plan is"): the readings of the run that
no setting shows (how vLLM was installed, the FlashInfer sampler NVIDIA's builds turn on, an NVSwitch board or a
PCIe card) are planned both ways and the band spans them; around that, each estimate strays from what vLLM
measures by a share fitted on the real start-up logs (`BandWidths`, benchmarks/kv_range_calibration.py). The
parts' far ends add up: the range is the budget with every part at one end of its band, not a percentage.
"""

from dataclasses import dataclass, replace

from kvtool.engine.plan.stages import kv_cache_spec, stage_budget
from kvtool.engine.sizing import release_rules
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.memory_budget import UNIFIED_MEMORY_ARCHS, MemoryBudget, nccl_bytes
from kvtool.engine.sizing.units import GiB, MiB

PARTS = ("weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes", "encoder_bytes")
PRINTED_ROUNDING = GiB // 200  # a figure a log prints with two decimals


@dataclass(frozen=True)
class BandWidths:
    """How far each estimate strays from vLLM's measurement beyond the readings planned both ways (fitted on the
    logs of tests/plan/startup_logs; docs/plan.md says on which)."""

    weights: float = 0.01  # share, from config shapes (norms and biases left out); 0 from checkpoint headers
    activation: float = 0.3  # share of the profile's peak
    activation_spread: int = 256 * MiB  # beyond it: the same flags measured 0.17 and 0.60 GiB a day apart
    cudagraphs: float = 0.6  # share of vLLM's own graph estimate, which follows the captures it profiles
    encoder: float = 2.0  # share of the multimodal profile's estimate (its dummy items per processor)
    non_torch: tuple[int, int] = (20 * MiB, 600 * MiB)  # kernels loaded outside torch: 0.02 - 0.43 GiB printed
    network: int = GiB  # NCCL over the network (ranks on several nodes, Ray): s-05 leaves 0.9 GiB more
    unified_host: float = 0.25  # of the weights: what the host takes while vLLM starts, on a unified-memory part


FITTED = BandWidths()


@dataclass(frozen=True)
class Readings:
    """What a range is built from: each estimated part's lowest and highest value over the readings of the run
    that no setting shows, and the parts of the budget that are not estimated."""

    parts: dict[str, tuple[int, int]]  # weights, activation, CUDA graphs, encoder
    non_torch_base: int  # the non-torch estimate without NCCL
    nccl: tuple[int, int]  # NCCL's buffers, lowest and highest reading
    requested: int
    fixed: int  # charged beside the parts: other processes as read, 0.34's headroom
    others: int  # what other processes may hold and the release charges, where no reading says (else 0)
    weights_exact: bool  # the checkpoint's own bytes (safetensors headers)
    ranks: int  # GPUs of the tp x pp group
    unified: bool  # the GPU shares one memory with its host (GB10, Jetson): the host's start-up use shows


@dataclass(frozen=True)
class KVRange:
    """The plan's figures at the two ends of the budget's band (low: every part at its largest)."""

    bytes: tuple[int, int]
    tokens: tuple[int, int]
    max_concurrency: tuple[float, float]
    safe_max_model_len: tuple[int, int]
    parts: dict[str, tuple[int, int]]


def kv_range(report, widths: BandWidths = FITTED) -> KVRange:
    """The range of the report's KV cache: a single value where the KV budget was given outright."""
    if report.budget.kv_cache_memory_bytes is not None:
        kv = report.budget.kv_cache_bytes
        return carried(report, (kv, kv), {})
    facts = readings(report)
    if report.from_log is not None:
        facts = replace(facts, others=0)  # the log measured what else held the GPU
    bands = part_bands(facts, widths)
    if report.from_log is not None:
        bands |= log_bands(report, widths)
    return carried(report, bytes_range(facts, bands), bands)


def log_bands(report, widths: BandWidths) -> dict[str, tuple[int, int]]:
    """An answer from a start-up log: each part the log printed or its budget solved is known to its two-decimal
    rounding, and carries the estimate's share only of what it moved to the new settings."""
    from kvtool.engine.startup_log.budget import ESTIMATED  # only an answer from a log loads the log's reader

    log, budget = report.from_log, report.budget
    shares = {**_shares(widths, False), "non_torch_bytes": 0.5}
    bands = {}
    for name, source in log.sources.items():
        if name in PARTS and source != ESTIMATED:
            spread = PRINTED_ROUNDING + round(abs(log.moved.get(name, 0)) * shares[name])
            bands[name] = (getattr(budget, name) - spread, getattr(budget, name) + spread)
    return bands


def bytes_range(facts: Readings, bands: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """The KV cache with every part at the far end of its band, and at the near end."""
    left = facts.requested - facts.fixed
    return left - sum(high for _, high in bands.values()), left - sum(low for low, _ in bands.values())


def part_bands(facts: Readings, widths: BandWidths = FITTED) -> dict[str, tuple[int, int]]:
    """Each part's band: its readings' span widened by the estimate's share (and spread)."""
    shares = _shares(widths, facts.weights_exact)
    bands = {name: _widened(facts.parts[name], shares[name]) for name in facts.parts}
    low, high = bands["activation_bytes"]
    bands["activation_bytes"] = (low, high + widths.activation_spread)
    floor, ceiling = widths.non_torch
    network = widths.network if facts.ranks > 1 else 0
    host = round(widths.unified_host * facts.parts["weights_bytes"][1]) if facts.unified else 0
    base = facts.non_torch_base
    bands["non_torch_bytes"] = (
        min(base, floor) + facts.nccl[0],
        max(base, ceiling) + facts.nccl[1] + network + host,
    )
    bands["other_process_bytes"] = (0, facts.others)
    return bands


def _shares(widths: BandWidths, weights_exact: bool) -> dict[str, float]:
    return {
        "weights_bytes": 0.0 if weights_exact else widths.weights,
        "activation_bytes": widths.activation,
        "cudagraph_bytes": widths.cudagraphs,
        "encoder_bytes": widths.encoder,
    }


def _widened(span: tuple[int, int], share: float) -> tuple[int, int]:
    return round(span[0] * (1 - min(share, 1))), round(span[1] * (1 + share))


def readings(report) -> Readings:
    """The report's budget and its alternatives, part by part."""
    request, budget = report.request, report.budget
    budgets = [budget, *alternative_budgets(report)]
    gpu = request.gpu
    rules = release_rules.budget_rules(
        request.release, report.v0, gpu.arch, request.flashinfer_sampler, gpu.nvswitch, request.install
    )
    host = round(rules.host_share * budget.weights_bytes)  # planned beside the kernels; the band spans 0 to its far end
    base = budget.non_torch_bytes - nccl_bytes(rules, request.tp, request.pp) - host
    spans = {name: _span(budgets, name) for name in PARTS if name != "non_torch_bytes"}
    nccl = [each.non_torch_bytes - base - host for each in budgets]
    return Readings(
        parts=spans,
        non_torch_base=base,
        nccl=(min(nccl), max(nccl)),
        requested=budget.requested_bytes,
        fixed=budget.non_kv_cache_bytes - sum(getattr(budget, name) for name in PARTS),
        others=_unread_others(report, rules),
        weights_exact=bool(report.spec.checkpoint_dtypes),
        ranks=request.tp * request.pp,
        unified=gpu.arch in UNIFIED_MEMORY_ARCHS,
    )


def _unread_others(report, rules) -> int:
    """Releases that measure total - free (V0 0.2.6 - 0.3.0 and 0.6.4, V1 0.7 - 0.9.0) charge whatever else holds
    memory on the GPU. Without a reading of its free memory, the share the utilization leaves out is what a GPU
    shared on purpose holds (vLLM 0.8.5 V1 at 0.4 failed where V0 started, s-157; a 0.8 L40S lost 4 GiB, s-154)."""
    gpu, budget = report.request.gpu, report.budget
    if not rules.charge_other_processes or gpu.free_bytes is not None:
        return 0
    return budget.total_bytes - budget.requested_bytes


def _span(budgets: list[MemoryBudget], name: str) -> tuple[int, int]:
    values = [getattr(budget, name) for budget in budgets]
    return min(values), max(values)


def alternative_budgets(report) -> list[MemoryBudget]:
    """The budget under each reading of the run that no setting shows, one flipped at a time: the other install
    (the sampler of 0.8 - 0.11.0), FlashInfer's sampler turned on (0.11.1 - 0.20: NVIDIA's builds), and an
    NVSwitch board or a PCIe card for a Hopper or Blackwell group."""
    request, release, gpu = report.request, report.release, report.request.gpu
    requests = [replace(request, install="pip" if request.install == "docker" else "docker")]
    if request.flashinfer_sampler is None and release.reached("flashinfer_sampler_opt_in"):
        requests.append(replace(request, flashinfer_sampler=True))
    if request.tp > 1 and (gpu.nvswitch or (gpu.arch or "").startswith(("sm90", "sm10"))):
        requests.append(replace(request, gpus=[replace(each, nvswitch=not gpu.nvswitch) for each in request.gpus]))
    return [
        stage_budget(report.spec, each, report.v0, report.max_num_batched_tokens, report.max_num_seqs, report.stage)
        for each in requests
    ]


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
    """The KV cache of the pipeline stage the report sizes by."""
    return kv_cache_spec(report.spec, report.request, report.v0, report.max_num_batched_tokens, report.stage)
