"""How each vLLM release sizes GPU memory at start-up: one table of boundaries, each with the release
that introduced it (read from the releases' own source; docs/plan.md gives one worked example each).

`VllmRelease("0.6")` answers `reached(name)` for any boundary; the planner turns those answers into
the budget, KV-cache and start-up rules of that release.
"""

import re
from dataclasses import dataclass

from kvtool.engine.sizing.defaults import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    EXTENSIBLE_GPU_MEMORY_UTILIZATION,
    LEGACY_GPU_MEMORY_UTILIZATION,
)
from kvtool.errors import UsageError

OLDEST, NEWEST = (0, 2, 0), (0, 34, 0)
NEWEST_NAME = "0.34"
# The release plan predicts unless told: the one kvtool's server, messages and diagnosis follow.
DEFAULT_RELEASE, DEFAULT_RELEASE_NAME = (0, 33, 0), "0.33"


@dataclass(frozen=True)
class Boundary:
    name: str
    release: tuple[int, int, int]
    what: str


BOUNDARIES = (
    Boundary(
        "paged_attention_v2",
        (0, 2, 2),
        "paged attention splits long sequences (0.2.0 - 0.2.1 keep a whole sequence's logits in shared memory and "
        "refuse a max_model_len x 4 B above the GPU's shared memory per block)",
    ),
    Boundary(
        "peak_all_processes",
        (0, 2, 6),
        "V0 peak = total - free after profiling: non-torch memory and other "
        "processes are charged (0.2.0-0.2.5 charge only the torch allocator peak)",
    ),
    Boundary("max_seq_len_check", (0, 2, 7), "V0 refuses max_model_len > block_size x num_gpu_blocks"),
    Boundary(
        "peak_since_init", (0, 3, 1), "V0 peak = free at init - free after profiling: NCCL charged, other processes not"
    ),
    Boundary("kv_cache_dtype_fp8", (0, 3, 0), "--kv-cache-dtype exists (auto, fp8_e5m2)"),
    Boundary("chunked_prefill_768", (0, 4, 1), "V0 chunked prefill defaults to 768 batched tokens"),
    Boundary("chunked_prefill_512", (0, 4, 2), "V0 chunked prefill defaults to 512 batched tokens"),
    Boundary("fp8_e4m3", (0, 4, 3), "--kv-cache-dtype fp8, fp8_e4m3, fp8_e5m2"),
    Boundary("chunked_prefill_auto", (0, 5, 3), "V0 turns chunked prefill on when max_model_len > 32768"),
    Boundary("limit_mm_per_prompt", (0, 5, 5), "--limit-mm-per-prompt exists"),
    Boundary(
        "v0_allocated_peak",
        (0, 6, 4),
        "V0 takes torch's allocated peak (0.2.6 - 0.6.3: the memory still reserved after the profile run)",
    ),
    Boundary("v0_concurrency_log", (0, 6, 3), "V0 logs 'Maximum concurrency for L tokens per request'"),
    Boundary(
        "v0_baseline_snapshot",
        (0, 6, 5),
        "V0 charges the non-torch increase since a baseline snapshot (0.6.4: total - free - torch allocated)",
    ),
    Boundary("chunked_prefill_2048", (0, 6, 5), "V0 chunked prefill defaults to 2048 batched tokens"),
    Boundary("mla_unpadded_heads", (0, 7, 0), "MLA models cache per-head K and V of qk_nope + qk_rope (256 before)"),
    Boundary("mla_latent_cache", (0, 7, 1), "MLA models cache one latent of kv_lora_rank + qk_rope per token"),
    Boundary("v1_default", (0, 8, 0), "the V1 engine is the default (V0 stays for unsupported settings)"),
    Boundary("sampler_warmup", (0, 8, 0), "V1 warms the sampler up on max_num_seqs rows inside the profile"),
    Boundary("mla_flashmla_64", (0, 8, 0), "MLA on Hopper forces block size 64 (FlashMLA)"),
    Boundary("sliding_window_spec", (0, 8, 3), "V1 sliding layers reserve cdiv(min(W - 1 + B, L), block) + 1 blocks"),
    Boundary("v1_fp8_kv", (0, 8, 5), "V1 accepts an fp8 KV cache (0.8.0-0.8.4 fall back to V0)"),
    Boundary("large_gpu_tier_by_memory", (0, 8, 5), "scheduler defaults by memory (>= 70 GiB), not by name"),
    Boundary("free_memory_check", (0, 9, 1), "V1 refuses to start when free memory < total x utilization"),
    Boundary("json_cli_args", (0, 9, 1), "dict flags (--limit-mm-per-prompt) take JSON, not key=value"),
    Boundary("hybrid_kv_manager", (0, 9, 1), "models mixing full and sliding layers keep their windows"),
    Boundary("a100_small_tier", (0, 9, 0), "A100s stay on the small scheduler tier"),
    Boundary(
        "capture_sizes_by_max_num_seqs",
        (0, 10, 0),
        "CUDA graphs are captured up to min(2 x max_num_seqs, 512) tokens (512 before)",
    ),
    Boundary("v1_hybrid_models", (0, 10, 2), "mamba / linear-attention models run on V1 (V0 from 0.8 to 0.10.1)"),
    Boundary("mla_cutlass_128_blackwell", (0, 10, 0), "MLA on Blackwell uses block size 128 (CUTLASS MLA)"),
    Boundary("v1_only", (0, 11, 0), "V0 is gone"),
    Boundary(
        "baseline_after_nccl_init",
        (0, 11, 0),
        "the memory baseline is taken after NCCL's init (its buffers, allocated at the first collective, are still "
        "charged)",
    ),
    Boundary("kv_cache_dtype_bfloat16", (0, 11, 0), "--kv-cache-dtype bfloat16"),
    Boundary("full_and_piecewise", (0, 11, 0), "FULL CUDA graphs for decode batches beside the PIECEWISE ones"),
    Boundary(
        "flashinfer_sampler_opt_in",
        (0, 11, 1),
        "the sampler warm-up sorts in PyTorch unless VLLM_USE_FLASHINFER_SAMPLER=1 (FlashInfer when installed before)",
    ),
    Boundary("capture_sizes_step_16", (0, 12, 0), "CUDA graph sizes step by 16 from 256 tokens (by 8 before)"),
    Boundary("conserving_memory_url", (0, 13, 0), "start-up errors name the conserving-memory page"),
    Boundary("async_scheduling", (0, 14, 0), "async scheduling by default: the next step is planned while one runs"),
    Boundary("requested_ceil", (0, 14, 0), "requested memory = ceil(total x utilization); messages use format_gib"),
    Boundary(
        "whole_model_kv_check",
        (0, 14, 0),
        "pipeline stages: the start-up check takes the whole model's KV against the smallest stage's memory",
    ),
    Boundary("per_stage_kv_check", (0, 17, 0), "pipeline stages: each stage checks its own layers again"),
    Boundary("triton_top_k_top_p", (0, 17, 0), "the sampler warm-up masks top-k / top-p in place (Triton, >= 8 rows)"),
    Boundary(
        "mla_block_by_backend", (0, 18, 0), "MLA block = the chosen backend's preferred size (Hopper 16, Blackwell 32)"
    ),
    Boundary("kv_cache_dtype_float16", (0, 18, 0), "--kv-cache-dtype float16"),
    Boundary("swap_space_removed", (0, 18, 0), "--swap-space is gone"),
    Boundary(
        "kv_group_size_heuristic",
        (0, 18, 0),
        "layer kinds are grouped by the largest kind's count when it is under 1.5 x the smallest's",
    ),
    Boundary("cudagraph_subtracted", (0, 20, 0), "CUDA-graph memory is estimated and subtracted by default"),
    Boundary("utilization_092", (0, 20, 0), "gpu_memory_utilization defaults to 0.92"),
    Boundary("tokens_from_concurrency", (0, 20, 1), "'GPU KV cache size' = int(max_concurrency x max_model_len)"),
    Boundary("flashinfer_sampler_default", (0, 21, 0), "the sampler warm-up uses FlashInfer by default again"),
    Boundary("cpu_backend_note", (0, 22, 0), "start-up errors mention the CPU backend"),
    Boundary("async_window", (0, 26, 0), "sliding layers reserve W - 1 + 2 x B tokens (two steps in flight)"),
    Boundary("huge_gpu_tier", (0, 28, 0), "GPUs of 160 GiB and more get 16384 / 1024"),
    Boundary(
        "mamba_align_mode",
        (0, 28, 0),
        "prefix caching is on for hybrid models: each mamba group keeps 2 state blocks per request ('align')",
    ),
    Boundary("capture_1024_blackwell", (0, 28, 0), "CUDA graphs up to 1024 tokens on data-centre Blackwell"),
    Boundary("null_block_in_check", (0, 29, 0), "the start-up check keeps one block for the null block"),
    Boundary(
        "extensible_kv_cache",
        (0, 34, 0),
        "the KV cache is sized after warmup from measured memory: utilization defaults to 1.0 and "
        "max(1 GiB, 0.75 x the transient peak) of the device stays free; no free-memory check",
    ),
)
_BY_NAME = {b.name: b for b in BOUNDARIES}


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """`0.6`, `0.6.3`, `v0.6.3.post1` -> (0, 6, 3); None when it is no release number."""
    match = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?\w*)?\s*", str(text))
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def parse_version(text: str) -> tuple[int, int, int]:
    """A release number plan models (0.2.0 to the newest); anything else is refused."""
    version = version_tuple(text)
    if version is None:
        raise UsageError(f"--vllm-version '{text}' is not a release number.", f"Use e.g. {NEWEST_NAME} or 0.6.3.")
    if not OLDEST <= version <= (*NEWEST[:2], 99):
        raise UsageError(
            f"vLLM {text} is outside the releases plan models (0.2.0 to {NEWEST_NAME}).",
            f"Use a --vllm-version from 0.2 to {NEWEST_NAME}.",
        )
    return version


def default_gpu_memory_utilization(vllm_version: str | None = None) -> float:
    """The default of the release a log names, in any version string a log may carry (unknown ones get the
    newest default)."""
    version = version_tuple(vllm_version) if vllm_version else None
    return VllmRelease(version or DEFAULT_RELEASE).default_gpu_memory_utilization


@dataclass(frozen=True)
class VllmRelease:
    """One release; `reached(name)` says whether a boundary of BOUNDARIES applies to it."""

    version: tuple[int, int, int] = DEFAULT_RELEASE

    @classmethod
    def parse(cls, text: str | None) -> "VllmRelease":
        return cls(parse_version(text) if text else DEFAULT_RELEASE)

    @property
    def name(self) -> str:
        return ".".join(map(str, self.version))

    def reached(self, boundary: str) -> bool:
        return self.version >= _BY_NAME[boundary].release

    @property
    def default_gpu_memory_utilization(self) -> float:
        """vLLM's default gpu_memory_utilization: 0.90 before 0.20.0, 0.92 from it, 1.0 with the extensible KV
        cache of 0.34 (config/cache.py resolved_gpu_memory_utilization)."""
        if self.reached("extensible_kv_cache"):
            return EXTENSIBLE_GPU_MEMORY_UTILIZATION
        if self.reached("utilization_092"):
            return DEFAULT_GPU_MEMORY_UTILIZATION
        return LEGACY_GPU_MEMORY_UTILIZATION

    def uses_v0(
        self, kv_cache_dtype: str = "auto", compute_capability: float | None = None, stateful: bool = False
    ) -> bool:
        """V0 before 0.8; up to 0.10.2 also for settings V1 did not support yet (an fp8 KV cache until
        0.8.5, GPUs below compute capability 8.0, mamba / linear-attention layers until 0.10.2)."""
        if not self.reached("v1_default"):
            return True
        if self.reached("v1_only"):
            return False
        old_gpu = compute_capability is not None and compute_capability < 8.0
        unsupported = stateful and not self.reached("v1_hybrid_models")
        return old_gpu or unsupported or (kv_cache_dtype != "auto" and not self.reached("v1_fp8_kv"))

    def engine_asked(self, use_v1: bool | None) -> str | None:
        """The engine VLLM_USE_V1 asks for in the releases that read it (0.7 - 0.10): "V1", "V0", or None."""
        if use_v1 is None or self.reached("v1_only") or self.version < (0, 7, 0):
            return None
        return "V1" if use_v1 else "V0"

    def kv_cache_dtypes(self) -> tuple[str, ...]:
        """The `--kv-cache-dtype` choices of the plain (not model-specific) kinds."""
        if not self.reached("kv_cache_dtype_fp8"):
            return ("auto",)
        if not self.reached("chunked_prefill_768"):
            return ("auto", "fp8_e5m2")
        if not self.reached("fp8_e4m3"):
            return ("auto", "fp8")
        names = ["auto"] + ["bfloat16"] * self.reached("kv_cache_dtype_bfloat16")
        names += ["float16"] * self.reached("kv_cache_dtype_float16")
        return (*names, "fp8", "fp8_e4m3", "fp8_e5m2", *(("fp8_inc",) if self.version >= (0, 10, 0) else ()))

    def check_kv_cache_dtype(self, kv_cache_dtype: str) -> None:
        if kv_cache_dtype not in self.kv_cache_dtypes():
            raise UsageError(
                f"vLLM {self.name} does not accept --kv-cache-dtype {kv_cache_dtype}.",
                f"Use one of: {', '.join(self.kv_cache_dtypes())}.",
            )

    def sliding_in_flight_batches(self, pp: int = 1) -> int:
        """Batches of max_num_batched_tokens a sliding layer keeps beyond its window; 0: sized as full attention."""
        if not self.reached("sliding_window_spec"):
            return 0
        if not self.reached("async_window"):
            return 1
        return 2 if pp <= 1 else pp  # async scheduling keeps two steps in flight at pp = 1

    def mixed_sliding_as_full(self) -> bool:
        """0.8.3-0.9.0 size models mixing full and sliding layers as all full attention."""
        return not self.reached("hybrid_kv_manager")

    def mla_block_size(self, arch: str | None) -> int:
        """vLLM's forced MLA block size on a GPU architecture (sm80, sm90, sm100, ...)."""
        sm = int(arch[2:]) if arch and arch.startswith("sm") and arch[2:].isdigit() else 90
        if not self.reached("mla_flashmla_64") or sm < 90 or sm >= 110:
            return 16  # Triton MLA
        if sm >= 100 and not self.reached("mla_cutlass_128_blackwell"):
            return 16  # FlashMLA needs SM90 until 0.10
        if sm >= 100:
            return 32 if self.reached("mla_block_by_backend") else 64 if self.version[:2] == (0, 17) else 128
        return 16 if self.reached("mla_block_by_backend") else 64  # FA3 MLA on Hopper from 0.18
