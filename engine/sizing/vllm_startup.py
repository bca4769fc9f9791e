"""One vLLM release's start-up checks in the order it runs them, each failing with that release's own
message, and the lines it logs once its KV cache is sized (its rules are in release_rules.py)."""

from dataclasses import dataclass

from kvtool.engine.sizing import defaults, messages
from kvtool.engine.sizing.units import GiB, format_gib
from kvtool.engine.sizing.vllm_versions import VllmRelease


@dataclass(frozen=True)
class StartupCheck:
    name: str  # free_memory | weights | kv_memory | one_request
    passed: bool
    message: str = ""  # vLLM's error for this release when it fails


def cpu_swap_blocks(v0: bool, block_bytes: int) -> int:
    """V0 allocates swap_space (4 GiB) of CPU blocks; V1 none."""
    return defaults.SWAP_SPACE_BYTES // block_bytes if v0 and block_bytes else 0


def startup_checks(release: VllmRelease, v0: bool, budget, kv, gpu, estimate: int) -> list[StartupCheck]:
    """vLLM's checks in its order: free memory (V1 0.9.1+, before loading), weights, KV memory, one request."""
    checks = []
    no_gpu = gpu.source == "kv-cache-memory"  # a KV budget given outright: no device to load onto
    checks_free = release.reached("free_memory_check") and not release.reached("extensible_kv_cache")
    if not v0 and checks_free and gpu.free_bytes is not None and not no_gpu:
        checks.append(
            StartupCheck(
                "free_memory", gpu.free_bytes >= budget.requested_bytes, _free_memory_message(release, gpu, budget)
            )
        )
    free = gpu.free_bytes if gpu.free_bytes is not None else gpu.total_bytes
    if not no_gpu:
        checks.append(
            StartupCheck("weights", budget.weights_bytes <= free, _weights_message(release, gpu, budget, free))
        )
    checks.append(StartupCheck("kv_memory", budget.kv_cache_bytes > 0 and kv.num_blocks > 0, _no_memory(release)))
    checks.append(StartupCheck("one_request", kv.fits, _too_small(release, v0, kv, estimate)))
    if not release.reached("paged_attention_v2") and gpu.shared_memory_per_block:
        checks.append(_shared_memory_check(kv, gpu))
    return checks


def _shared_memory_check(kv, gpu) -> StartupCheck:
    """0.2.0 - 0.2.1: the paged-attention kernel holds one fp32 logit per token of a sequence in shared memory
    (vLLM pads the length with a float division, as printed)."""
    padded = (kv.max_model_len + kv.block_size - 1) / kv.block_size * kv.block_size
    message = messages.SHARED_MEMORY_BELOW_MAX_SEQ_LEN.format(
        max_model_len=kv.max_model_len,
        block_size=kv.block_size,
        capability=tuple(int(part) for part in str(gpu.compute_capability).split(".")),
        required=(padded + 512) * 4,
        available=gpu.shared_memory_per_block,
    )
    return StartupCheck("shared_memory", padded * 4 <= gpu.shared_memory_per_block, message)


def _free_memory_message(release: VllmRelease, gpu, budget) -> str:
    values = dict(
        free_gib=format_gib(gpu.free_bytes),
        total_gib=format_gib(gpu.total_bytes),
        gpu_memory_utilization=budget.gpu_memory_utilization,
        requested_gib=format_gib(budget.requested_bytes),
    )
    if release.reached("requested_ceil"):
        return messages.FREE_MEMORY_BELOW_UTILIZATION.format(device=f"cuda:{gpu.index or 0}", **values)
    return messages.FREE_MEMORY_BELOW_UTILIZATION_V1.format(**values)


def _weights_message(release: VllmRelease, gpu, budget, free: int) -> str:
    prefix = messages.WEIGHTS_DO_NOT_FIT_PREFIX if release.reached("conserving_memory_url") else ""
    text = messages.WEIGHTS_DO_NOT_FIT.format(
        prefix=prefix,
        tried_gib=format_gib(budget.weights_bytes - free),
        device=f"GPU {gpu.index or 0}",
        total_gib=format_gib(gpu.total_bytes),
        free_gib=format_gib(free),
    )
    return text + (")" if prefix else "")


def _no_memory(release: VllmRelease) -> str:
    return (
        messages.no_memory_for_cache()
        if release.reached("cpu_backend_note")
        else messages.NO_MEMORY_FOR_CACHE_V0
        + (messages.url_sentence() if release.reached("conserving_memory_url") else "")
    )


def _too_small(release: VllmRelease, v0: bool, kv, estimate: int) -> str:
    if v0:
        return messages.MAX_SEQ_LEN_ABOVE_BLOCKS.format(
            max_model_len=kv.max_model_len, kv_cache_tokens=kv.num_blocks * kv.block_size
        )
    if release.reached("cpu_backend_note"):
        return messages.kv_cache_too_small(kv.max_model_len, kv.request_bytes, kv.available_bytes, estimate)
    rounded = format_gib if release.reached("requested_ceil") else (lambda b: f"{b / GiB:.2f}")
    values = dict(
        max_model_len=kv.max_model_len, needed_gib=rounded(kv.request_bytes), available_gib=rounded(kv.available_bytes)
    )
    if release.version < (0, 8, 3):
        return messages.KV_CACHE_TOO_SMALL_GB.format(**values)
    url = messages.url_sentence() if release.reached("conserving_memory_url") else ""
    return messages.KV_CACHE_TOO_SMALL_ESTIMATE.format(estimate=estimate, url_sentence=url, **values)


def startup_log_lines(release: VllmRelease, v0: bool, kv, num_cpu_blocks: int) -> list[str]:
    """The lines the release logs with the figures once its KV cache is sized."""
    length = kv.max_model_len
    if v0:
        device = "GPU" if release.version < (0, 7, 0) else "CUDA" if release.version < (0, 7, 3) else "cuda"
        lines = [
            messages.V0_BLOCKS_LOG.format(device=device, num_gpu_blocks=kv.num_blocks, num_cpu_blocks=num_cpu_blocks)
        ]
        if release.reached("v0_concurrency_log"):
            lines.append(messages.CONCURRENCY_LOG.format(max_model_len=length, max_concurrency=kv.max_concurrency))
        return lines
    if release.version >= (0, 28, 0):
        return [kv.log_line()]
    return [
        messages.KV_TOKENS_LOG.format(kv_cache_tokens=kv.kv_cache_tokens),
        messages.CONCURRENCY_LOG.format(max_model_len=f"{length:,}", max_concurrency=kv.max_concurrency),
    ]
