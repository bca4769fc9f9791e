"""Every default and choice list of the engine and the planner, defined once (the server's are in
engine/server/defaults.py).

The engine, `plan`, `serve`, the workload profiles and the command-line options all read these names;
the vLLM release each value comes from is in docs/design.md ("vLLM facts kvtool relies on").
"""

import os

from kvtool.engine.sizing.units import GiB

# Model dtypes (`--dtype`).
DTYPES = ("auto", "bfloat16", "float16", "float32")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# KV-cache dtypes vLLM 0.33 accepts among the plain ones; every fp8 flavour stores 1 byte per element.
FP8_KV_CACHE_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", *FP8_KV_CACHE_DTYPES)
# fp8_inc is Intel Gaudi's scaled format: the embedded engine stores the other two fp8 layouts.
ENGINE_KV_CACHE_DTYPES = tuple(name for name in KV_CACHE_DTYPES if name != "fp8_inc")

# What happens to a request whose prompt + max_tokens exceeds max_model_len.
OVERFLOW_POLICIES = ("reject", "clamp")
DEFAULT_OVERFLOW = "clamp"  # vLLM 0.32+; "reject" is the <= 0.31 behaviour

# The largest dense tensor one prompt_embeds payload may declare (0 or less: no limit): vLLM's environment
# variable and its default.
MAX_EMBED_DECODE_BYTES = ("VLLM_MAX_EMBED_DECODE_BYTES", 2 << 30)

LOAD_FORMATS = ("auto", "dummy")
ENGINE_QUANTIZATIONS = ("gguf",)  # the embedded engine's --quantization: GGUF weights kept quantized (CPU)
DEFAULT_MODEL = "smollm2"
HUB_FACTS_FRESH_SECONDS = 24 * 3600  # a Hub model's cached facts answer plan without asking the Hub for a day

DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_TOKENS = 16  # SamplingParams' and /v1/completions' max_tokens when a request does not set it (vLLM)
INT64_MAX = 2**63 - 1  # the bound of vLLM's 64-bit request integers
MAX_LOGPROBS = 20  # vLLM's default max_logprobs: the most logprobs (or top_logprobs) a request may ask for
MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's bound on the length of a request's logprob_token_ids
DEFAULT_MAX_MODEL_LEN = 2048  # when a config names no context length at all

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM >= 0.20
LEGACY_GPU_MEMORY_UTILIZATION = 0.90  # vLLM < 0.20
EXTENSIBLE_GPU_MEMORY_UTILIZATION = 1.0  # vLLM >= 0.34 with its extensible KV cache (the CUDA default)
HIGHEST_ADVISED_UTILIZATION = 0.98  # fixes never advise more: CUDA context and fragmentation need the rest

# (max_num_batched_tokens, max_num_seqs) defaults, vLLM 0.33, by device class and entry point.
CPU_SCHEDULER_LIMITS = {"server": (2048, 128), "offline": (4096, 256)}
SMALL_GPU_SCHEDULER_LIMITS = {"server": (2048, 256), "offline": (8192, 256)}  # < 70 GiB, or any A100
LARGE_GPU_SCHEDULER_LIMITS = {"server": (8192, 1024), "offline": (16384, 1024)}  # >= 70 GiB (H100, H200, MI300X)
HUGE_GPU_SCHEDULER_LIMITS = {"server": (16384, 1024), "offline": (16384, 1024)}  # >= 160 GiB (B200, B300)
DEFAULT_MAX_NUM_BATCHED_TOKENS = SMALL_GPU_SCHEDULER_LIMITS["server"][0]
# What a log that names no scheduler limits most likely ran with: the offline defaults of a common GPU.
ASSUMED_MAX_NUM_BATCHED_TOKENS, ASSUMED_MAX_NUM_SEQS = SMALL_GPU_SCHEDULER_LIMITS["offline"]

# V0 (vLLM < 0.8): chunked prefill is on by default above this context (0.5.3+); its chunk size by release.
V0_MAX_NUM_SEQS = 256
V0_CHUNKED_PREFILL_ABOVE = 32768
V0_UNCHUNKED_MIN_BATCHED_TOKENS = 2048  # without chunking: max(max_model_len, 2048)
V0_MULTIMODAL_MIN_BATCHED_TOKENS = 5120  # 0.6.3+ (4096 in 0.6.0-0.6.2)
V0_CHUNK_SIZES = {(0, 4, 1): 768, (0, 4, 2): 512, (0, 6, 5): 2048}  # release -> default chunk
SWAP_SPACE_BYTES = 4 * GiB  # V0's CPU swap space; V1 allocates no CPU blocks
V1_EARLY_MAX_NUM_SEQS = 1024  # 0.8.0-0.8.3: every GPU

# KV-cache usage, the monitoring checklist's levels: preemption follows a full cache.
KV_CACHE_PRESSURE_PERCENT = 90.0  # full when requests wait behind it (watch: a warning)
KV_CACHE_NEAR_FULL_PERCENT = 95.0  # full whatever the queue (watch: critical)

CPU_KV_CACHE_CAP = 2 * GiB  # the most the CPU path gives the KV cache unless told otherwise
CPU_KV_CACHE_RAM_FRACTION = 4  # ... and never more than a quarter of the machine's memory
# OpenMP threads that wait at a barrier spin briefly (libgomp's rounds, some microseconds), then sleep:
# long enough to bridge the gap between two kernels of a decode step, short enough that on a shared
# machine a waiting team does not hold the cores another process needs (libgomp's default spins for
# 300,000 rounds; sleeping at once, OMP_WAIT_POLICY=PASSIVE, made batch-1 decode 1.7x slower).
CPU_OMP_ENVIRONMENT = {"GOMP_SPINCOUNT": "10000"}
# glibc malloc for the CPU engine: buffers up to 32 MiB (glibc's largest mmap threshold on 64-bit) come
# from the heap, and up to 1 GiB of freed heap is kept, so a prefill's activations reuse the pages the
# last step freed instead of faulting fresh ones in (fp32 SmolLM2 prefill was up to 1.4x slower for that).
CPU_MALLOC_MMAP_THRESHOLD = 32 << 20
CPU_MALLOC_TRIM_THRESHOLD = 1 * GiB


def default_cpu_threads() -> int:
    """Threads for the CPU engine: the CPUs this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0))


def default_scheduler_limits(
    total_bytes: int | None, gpu_name: str = "", server: bool = True, gpu_arch: str | None = None
) -> tuple[int, int]:
    """vLLM 0.33's (max_num_batched_tokens, max_num_seqs) for a device: None total means a CPU."""
    entry = "server" if server else "offline"
    if total_bytes is None:
        return CPU_SCHEDULER_LIMITS[entry]
    if total_bytes >= 160 * GiB:
        return HUGE_GPU_SCHEDULER_LIMITS[entry]
    if total_bytes >= 70 * GiB and "a100" not in gpu_name.lower() and gpu_arch != "sm121":  # GB10: small tier
        return LARGE_GPU_SCHEDULER_LIMITS[entry]
    return SMALL_GPU_SCHEDULER_LIMITS[entry]
