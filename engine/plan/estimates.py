"""What a plan assumed and estimated rather than knew, said in one line each: the scheduler defaults of a GPU
given only by its size, and the estimated share of the budget when it decides much of the KV cache."""

from dataclasses import replace

from kvtool.engine.sizing import release_rules
from kvtool.engine.sizing.profile_run import activation_bytes
from kvtool.engine.sizing.units import format_gib

SPREAD_WORTH_SAYING = 0.05  # of the KV cache
ESTIMATED = {
    "activation_bytes": "activation peak",
    "non_torch_bytes": "non-torch and NCCL",
    "cudagraph_bytes": "CUDA graphs",
    "encoder_bytes": "encoder profile",
}
FROM_LOG = "`kvtool plan --from-log LOG` measures them from one vLLM start-up log"


def notes(report) -> list[str]:
    """Nothing when the KV budget was given outright, or when a start-up log measured it (--from-log says
    which of its figures are measured)."""
    if report.budget.kv_cache_memory_bytes is not None or report.from_log is not None:
        return []
    return [note for note in (tier_note(report), estimate_note(report)) if note]


def tier_note(report) -> str | None:
    """A size alone fits GPUs on different scheduler tiers (A100-80GB and H100): which one was assumed, and
    what the other gives."""
    readings, request = report.scheduler_readings, report.request
    if len(readings) < 2 or (request.max_num_batched_tokens and request.max_num_seqs):
        return None
    (assumed, names), *others = readings.items()
    kv = report.budget.kv_cache_bytes
    alternatives = []
    for limits, other_names in others:
        other_kv = report.kv_cache_bytes_with(*limits)
        change = f"{(other_kv - kv) / abs(kv):+.0%}" if kv else "n/a"
        alternatives.append(
            f"on {', '.join(other_names)} vLLM {report.release.name} uses {limits[0]} / {limits[1]}: "
            f"{'+' if other_kv >= kv else '-'}{format_gib(abs(other_kv - kv))} GiB of KV cache ({change})"
        )
    return (
        f"a GPU given by its size only: assumed {assumed[0]} batched tokens / {assumed[1]} sequences as on "
        f"{', '.join(names)}; {'; '.join(alternatives)}. Name the GPU with --gpu to settle it."
    )


def estimate_note(report) -> str | None:
    """When the estimated components could move the KV cache by more than a few percent."""
    budget = report.budget
    parts = {label: getattr(budget, field) for field, label in ESTIMATED.items()}
    low, high = report.kv_range.bytes
    spread = (high - low) / 2
    sampler = _sampler_alternative(report)
    kv = budget.kv_cache_bytes
    if kv > 0 and spread < SPREAD_WORTH_SAYING * kv:
        return None
    named = ", ".join(f"{name} {format_gib(size)} GiB" for name, size in parts.items() if size)
    share = f", ±{spread / kv:.0%} of it" if kv > 0 else ""
    line = (
        f"estimated, not measured: {named}; the KV cache lies between {format_gib(low)} and {format_gib(high)} GiB "
        f"over their bands{share}; {FROM_LOG}."
    )
    if sampler:
        line += (
            f" The sampler warm-up assumes FlashInfer, as in vLLM's Docker image; without it (a pip install, or "
            f"VLLM_USE_FLASHINFER_SAMPLER=0) the peak is {format_gib(sampler)} GiB higher."
        )
    return line


def _sampler_alternative(report) -> int:
    """0.8 - 0.11 sample with FlashInfer only where it is installed: the peak without it, less the peak assumed."""
    request = report.request
    pinned = request.flashinfer_sampler is not None or request.install == "pip"
    if report.v0 or pinned or request.release.reached("flashinfer_sampler_opt_in"):
        return 0
    rules = release_rules.budget_rules(request.release, report.v0, request.gpu.arch, request.flashinfer_sampler)
    if rules.profile.sampler != "flashinfer":
        return 0
    last = report.stage == request.pp - 1
    args = (report.spec, report.max_num_batched_tokens, report.max_num_seqs, request.dtype, request.tp)
    native = activation_bytes(*args, replace(rules.profile, sampler="native"), last)
    return native - activation_bytes(*args, rules.profile, last)
