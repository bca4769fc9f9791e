"""What one vLLM release does differently, turned into the rules the sizing functions take: its scheduler
defaults for a GPU, how it measures the memory that is not KV cache, and its KV-cache arithmetic."""

import os

from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.cudagraphs import CaptureRules
from kvtool.engine.sizing.gpus import GpuInfo, catalog_matches
from kvtool.engine.sizing.kv_layout import KVRules
from kvtool.engine.sizing.memory_budget import (
    CONTEXT_BYTES,
    NCCL_BYTES_PER_PEER,
    V0_NON_TORCH_BYTES,
    V1_NON_TORCH_BYTES,
    BudgetRules,
)
from kvtool.engine.sizing.profile_run import ProfileRules
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.errors import UsageError


def scheduler_limits(
    release: VllmRelease,
    v0: bool,
    total_bytes: int,
    gpu_name: str,
    gpu_arch: str | None,
    max_model_len: int,
    chunked_off: bool = False,
    multimodal: bool = False,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` picks when neither is given."""
    if v0:
        return _v0_batched_tokens(release, max_model_len, chunked_off, multimodal), defaults.V0_MAX_NUM_SEQS
    name = gpu_name.lower()
    if not release.reached("large_gpu_tier_by_memory"):  # 0.8.0-0.8.4 look at the name
        large = "h100" in name or "h200" in name
        seqs = defaults.V1_EARLY_MAX_NUM_SEQS if large or release.version < (0, 8, 4) else 256
        return (8192 if large else 2048), seqs
    if total_bytes >= 160 * GiB and release.reached("huge_gpu_tier"):
        return defaults.HUGE_GPU_SCHEDULER_LIMITS["server"]
    small = "a100" in name and release.reached("a100_small_tier")
    small = small or (gpu_arch == "sm121" and release.reached("gb10_small_tier"))
    if total_bytes >= 70 * GiB and not small:
        return defaults.LARGE_GPU_SCHEDULER_LIMITS["server"]
    return defaults.SMALL_GPU_SCHEDULER_LIMITS["server"]


def scheduler_readings(release: VllmRelease, v0: bool, gpu: GpuInfo, *args) -> dict[tuple[int, int], list[str]]:
    """The scheduler limits vLLM would pick, and for which GPUs: a named GPU has one reading; a size alone
    has one per catalog GPU of that size (A100-80GB and H100 differ by 0.1 GiB but not by one tier). The
    reading most of them share comes first."""
    named = gpu.source != "size" or gpu.arch is not None
    matches = [] if named else catalog_matches(gpu.total_bytes)
    readings: dict[tuple[int, int], list[str]] = {}
    for match in matches or [gpu]:
        limits = scheduler_limits(release, v0, gpu.total_bytes, match.name, match.arch, *args)
        readings.setdefault(limits, []).append(match.name)
    return dict(sorted(readings.items(), key=lambda item: -len(item[1])))


def v0_chunked_prefill(release: VllmRelease, max_model_len: int, sliding: bool, mla: bool, multimodal: bool) -> bool:
    """V0 turns chunked prefill on by itself above 32k context (0.5.3+), not for sliding-window, MLA or
    multimodal models."""
    if not release.reached("chunked_prefill_auto") or sliding:
        return False
    if (mla or multimodal) and release.version >= (0, 6, 0):
        return False
    return max_model_len > defaults.V0_CHUNKED_PREFILL_ABOVE


def _v0_batched_tokens(release: VllmRelease, max_model_len: int, chunked_off: bool, multimodal: bool) -> int:
    if not chunked_off:
        return next(
            size for start, size in sorted(defaults.V0_CHUNK_SIZES.items(), reverse=True) if release.version >= start
        )
    floor = defaults.V0_MULTIMODAL_MIN_BATCHED_TOKENS if multimodal and release.version >= (0, 6, 3) else 0
    return max(max_model_len, defaults.V0_UNCHUNKED_MIN_BATCHED_TOKENS, floor)


def sampler_path(release: VllmRelease, v0: bool, use_flashinfer: bool | None = None) -> str:
    """The sampler the profile warms up (v1/sample/ops/topk_topp_sampler.py of each release), as
    VLLM_USE_FLASHINFER_SAMPLER (`use_flashinfer`) steers it. Unset, 0.8 - 0.11 use FlashInfer when it is
    installed, as in vLLM's Docker image (a pip install without it sorts in PyTorch, as =0 does); 0.12 - 0.20
    only when set to 1; 0.21+ unless set to 0 (its PyTorch path masks in place in Triton too)."""
    if v0:
        return "v0"
    if release.reached("flashinfer_sampler_default") or not release.reached("flashinfer_sampler_opt_in"):
        return "native" if use_flashinfer is False and not release.reached("triton_top_k_top_p") else "flashinfer"
    if use_flashinfer:
        return "flashinfer"
    return "triton" if release.reached("triton_top_k_top_p") else "native"


def budget_rules(
    release: VllmRelease, v0: bool, arch: str | None = None, use_flashinfer_sampler: bool | None = None
) -> BudgetRules:
    """How the release measures what is not KV cache, on a GPU of architecture `arch`."""
    total_minus_free = (
        (release.reached("peak_all_processes") and not release.reached("peak_since_init"))
        or release.version[:3] == (0, 6, 4)
        or (not v0 and not release.reached("free_memory_check"))
    )
    non_torch = CONTEXT_BYTES if total_minus_free else V0_NON_TORCH_BYTES if v0 else V1_NON_TORCH_BYTES
    nccl = release.reached("peak_all_processes") and (v0 or not release.reached("nccl_not_charged"))
    profile = ProfileRules(
        sampler=sampler_path(release, v0, use_flashinfer_sampler),
        logits_for_every_token=not v0 and release.version < (0, 7, 3),
        v0=v0,
    )
    return BudgetRules(
        ceil_request=release.reached("requested_ceil"),
        profile=profile,
        non_torch_bytes=non_torch if release.reached("peak_all_processes") else 0,
        nccl_bytes_per_peer=NCCL_BYTES_PER_PEER["hopper" if _sm(arch) >= 90 else "ampere"] if nccl else 0,
        charge_other_processes=total_minus_free,
        subtract_cudagraphs=not v0 and release.reached("cudagraph_subtracted"),
        extensible=release.reached("extensible_kv_cache"),
        capture=_capture_rules(release, arch),
        mxfp4_align=_mxfp4_align(release, arch),
    )


def _sm(arch: str | None) -> int:
    digits = arch[2:] if arch and arch.startswith("sm") else ""
    return int(digits) if digits.isdigit() else 0


def _capture_rules(release: VllmRelease, arch: str | None) -> CaptureRules:
    blackwell = 100 <= _sm(arch) < 110  # data-centre Blackwell (SM 10.x)
    return CaptureRules(
        by_max_num_seqs=release.reached("capture_sizes_by_max_num_seqs"),
        step_16=release.reached("capture_sizes_step_16"),
        full_graphs=release.reached("full_and_piecewise"),
        largest=1024 if blackwell and release.reached("capture_1024_blackwell") else 512,
    )


def _mxfp4_align(release: VllmRelease, arch: str | None) -> tuple[int, int]:
    """The MXFP4 MoE kernel's padding (quantization/mxfp4.py create_weights): Marlin below SM 9.0, and on
    Hopper while vLLM pinned a torch older than 2.8 (to 0.10.1); FlashInfer on SM 10.x; Triton otherwise."""
    sm = _sm(arch)
    if arch and arch.startswith("gfx"):
        return 128, 1
    if 0 < sm < 90 or (sm == 90 and release.version < (0, 10, 2)):
        return 128, 256
    return (256, 256) if 100 <= sm < 110 else (64, 1)


def kv_rules(release: VllmRelease, v0: bool, pp: int, mixed_sliding: bool) -> KVRules:
    batches = 0 if v0 else release.sliding_in_flight_batches(pp)
    if mixed_sliding and release.mixed_sliding_as_full():
        batches = 0
    return KVRules(
        sliding_batches=batches,
        null_block_in_check=release.reached("null_block_in_check"),
        tokens_from_concurrency=not v0 and release.reached("tokens_from_concurrency"),
        v0_check=v0,
        v0_length_check=release.reached("max_seq_len_check"),
        group_size_heuristic=release.reached("kv_group_size_heuristic"),
        whole_model_check=release.reached("whole_model_kv_check") and not release.reached("per_stage_kv_check"),
        state_blocks_per_request=2 if release.reached("mamba_align_mode") else 1,
        hybrid_groups=not v0 and release.reached("hybrid_kv_manager"),
    )


def parse_env_flag(name: str) -> bool | None:
    """A vLLM boolean environment variable as vLLM reads it (`bool(int(value))`); None when unset."""
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    if value.strip() not in ("0", "1"):
        raise UsageError(f"{name}={value} is not 0 or 1.", f"Set {name} to 0 or 1, as vLLM reads it.")
    return value.strip() == "1"
