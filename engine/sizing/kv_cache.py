"""THE memory and length model (vLLM 0.33 v1 arithmetic): KV bytes, blocks, capacity, length checks.

`kvtool plan`, the engine's start-up and `kvtool diagnose` all size the KV cache with these functions.
"""

from dataclasses import dataclass

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.defaults import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DTYPE_BYTES,
    FP8_KV_CACHE_DTYPES,
    KV_CACHE_DTYPES,
)
from kvtool.engine.sizing.hf_config import DTYPE_NAMES
from kvtool.engine.sizing.request_length import RequestTooLongError, check_request_length  # noqa: F401 (re-exported)
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB, format_gib, parse_human_int  # noqa: F401 (GiB is part of this API)
from kvtool.errors import StartupError, UsageError

ATTENTION_KINDS = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class KVRules:
    """What differs between vLLM releases in the KV arithmetic (the defaults are vLLM 0.33's at pp = 1)."""

    sliding_batches: int = 2  # batches of max_num_batched_tokens a sliding layer keeps beyond its window; 0: full
    null_block_in_check: bool = True  # 0.29+: the start-up check keeps one block back
    tokens_from_concurrency: bool = True  # 0.20.1+: logged tokens = int(concurrency x max_model_len)
    v0_check: bool = False  # V0: starts when max_model_len <= block_size x num_gpu_blocks (0.2.7+; before: any block)
    v0_length_check: bool = True


V033 = KVRules()


class KVCacheTooSmallError(StartupError):
    """The KV cache cannot hold one request of max_model_len tokens (vLLM's start-up failure)."""

    def __init__(self, message: str, needed_bytes: int, available_bytes: int, estimated_max_model_len: int):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.estimated_max_model_len = estimated_max_model_len


def kv_cache_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per cached element: `auto` follows the model dtype; every fp8 flavour is 1 byte."""
    if kv_cache_dtype in FP8_KV_CACHE_DTYPES:
        return 1
    name = DTYPE_NAMES.get(model_dtype) if kv_cache_dtype == "auto" else kv_cache_dtype
    if name not in DTYPE_BYTES or kv_cache_dtype not in KV_CACHE_DTYPES:
        raise UsageError(f"unknown kv-cache dtype '{kv_cache_dtype}'.", f"Use one of: {', '.join(KV_CACHE_DTYPES)}.")
    return DTYPE_BYTES[name]


def kv_heads_per_rank(spec: ModelSpec, tp: int = 1) -> int:
    """KV heads each tensor-parallel rank stores; heads are replicated when tp exceeds them."""
    return 1 if spec.is_mla else max(1, spec.num_key_value_heads // tp)


def layer_bytes_per_token(spec: ModelSpec, kv_cache_dtype: str = "auto", tp: int = 1) -> int:
    """One token in one attention layer: K and V heads, or MLA's single latent (no factor 2, no TP split)."""
    dtype_bytes = kv_cache_dtype_bytes(kv_cache_dtype, spec.dtype)
    if spec.is_mla:
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * dtype_bytes
    return 2 * kv_heads_per_rank(spec, tp) * spec.head_dim * dtype_bytes


def stage_layer_counts(spec: ModelSpec, pp: int = 1) -> tuple[int, int]:
    """(full, sliding) attention layers on the pipeline stage that stores the most KV."""
    base, extra = divmod(len(spec.layer_types), pp)
    stages, start = [], 0
    for stage in range(pp):
        kinds = spec.layer_types[start : start + base + (stage < extra)]
        start += base + (stage < extra)
        stages.append((kinds.count("full_attention"), kinds.count("sliding_attention")))
    return max(stages, key=sum)


def kv_bytes_per_token(spec: ModelSpec, kv_cache_dtype: str = "auto", tp: int = 1, pp: int = 1) -> int:
    """KV bytes one more cached token costs on one GPU, over every attention layer of its stage."""
    return sum(stage_layer_counts(spec, pp)) * layer_bytes_per_token(spec, kv_cache_dtype, tp)


def block_bytes(
    spec: ModelSpec, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype: str = "auto", tp: int = 1, pp: int = 1
) -> int:
    """One block of block_size tokens across all attention layers of a GPU."""
    return block_size * kv_bytes_per_token(spec, kv_cache_dtype, tp, pp)


def num_blocks_for(
    available_bytes: int,
    spec: ModelSpec,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
) -> int:
    size = block_bytes(spec, block_size, kv_cache_dtype, tp, pp)
    return max(0, int(available_bytes) // size) if size else 0


def request_kv_bytes(
    spec: ModelSpec,
    max_model_len: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
    rules: KVRules = V033,
) -> int:
    """Worst-case KV of one request of max_model_len tokens; sliding layers keep only their window
    plus the tokens of the steps in flight (vLLM 0.33: two, with async scheduling)."""
    full, sliding = stage_layer_counts(spec, pp)
    page = block_size * layer_bytes_per_token(spec, kv_cache_dtype, tp)
    full_blocks = _cdiv(max_model_len, block_size)
    if not sliding or not spec.sliding_window or not rules.sliding_batches:
        return (full + sliding) * full_blocks * page
    batched = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    window_tokens = min(spec.sliding_window - 1 + rules.sliding_batches * batched, max_model_len)
    return full * full_blocks * page + sliding * (_cdiv(window_tokens, block_size) + 1) * page


def estimate_max_model_len(
    available_bytes: int,
    spec: ModelSpec,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
    limit: int | None = None,
    rules: KVRules = V033,
) -> int:
    """Largest length in [1, limit] (default: the model's context) whose request fits; 0 if none does."""
    size = block_bytes(spec, block_size, kv_cache_dtype, tp, pp)
    if rules.v0_check:
        return min(int(available_bytes) // size * block_size if size else 0, limit or spec.derived_max_model_len)
    usable = available_bytes - size * rules.null_block_in_check

    def fits(length: int) -> bool:
        return (
            request_kv_bytes(spec, length, block_size, kv_cache_dtype, tp, pp, max_num_batched_tokens, rules) <= usable
        )

    low, high = 0, limit or spec.derived_max_model_len
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def check_kv_cache_fits(
    spec: ModelSpec,
    available_bytes: int,
    max_model_len: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
) -> None:
    """Raise KVCacheTooSmallError, worded like vLLM 0.33, unless one max_model_len request fits."""
    if available_bytes <= 0:
        raise KVCacheTooSmallError(messages.no_memory_for_cache(), 0, int(available_bytes), 0)
    args = (block_size, kv_cache_dtype, tp, pp)
    needed = request_kv_bytes(spec, max_model_len, *args, max_num_batched_tokens)
    if request_fits(needed, available_bytes, block_bytes(spec, *args)):
        return
    estimate = estimate_max_model_len(available_bytes, spec, *args, max_num_batched_tokens, limit=max_model_len)
    raise KVCacheTooSmallError(
        messages.kv_cache_too_small(max_model_len, needed, available_bytes, estimate),
        needed,
        int(available_bytes),
        estimate,
    )


def request_fits(
    request_bytes: int,
    available_bytes: int,
    block: int,
    rules: KVRules = V033,
    max_model_len: int = 0,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> bool:
    """vLLM's start-up check: one max_model_len request (V1), or max_model_len tokens of blocks (V0)."""
    if available_bytes <= 0 or not block:
        return False
    if rules.v0_check:
        return max_model_len <= available_bytes // block * block_size or (
            not rules.v0_length_check and available_bytes >= block
        )
    return request_bytes <= available_bytes - block * rules.null_block_in_check


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVCachePlan:
    """What a KV budget buys: the numbers `kvtool plan` prints and the engine allocates."""

    available_bytes: int
    block_size: int
    kv_bytes_per_token: int
    block_bytes: int
    num_blocks: int
    max_model_len: int
    request_bytes: int  # worst-case KV of one max_model_len request
    max_concurrency: float
    kv_cache_tokens: int
    safe_max_model_len: int
    fits: bool

    def log_line(self, device: str = "GPU") -> str:
        return messages.kv_cache_size_log(self.kv_cache_tokens, self.max_model_len, self.max_concurrency, device)


def plan_kv_cache(
    available_bytes: int,
    spec: ModelSpec,
    max_model_len: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
    rules: KVRules = V033,
) -> KVCachePlan:
    """Blocks, tokens, concurrency and the safe length for a KV budget (vLLM 0.33 formulas by default)."""
    args = (block_size, kv_cache_dtype, tp, pp)
    num_blocks = num_blocks_for(available_bytes, spec, *args)
    size = block_bytes(spec, *args)
    request = request_kv_bytes(spec, max_model_len, *args, max_num_batched_tokens, rules)
    concurrency = num_blocks * size / request if request else 0.0
    if rules.v0_check:  # V0 logs num_gpu_blocks x block_size / max_model_len
        concurrency = num_blocks * block_size / max_model_len
    tokens = int(concurrency * max_model_len) if rules.tokens_from_concurrency else num_blocks * block_size
    return KVCachePlan(
        available_bytes=int(available_bytes),
        block_size=block_size,
        kv_bytes_per_token=size // block_size,
        block_bytes=size,
        num_blocks=num_blocks,
        max_model_len=max_model_len,
        request_bytes=request,
        max_concurrency=concurrency,
        kv_cache_tokens=tokens,
        safe_max_model_len=safe_max_model_len(available_bytes, spec, *args, max_num_batched_tokens, rules),
        fits=request_fits(request, available_bytes, size, rules, max_model_len, block_size),
    )


def safe_max_model_len(
    available_bytes: int,
    spec: ModelSpec,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
    rules: KVRules = V033,
) -> int:
    """The largest length that fits, rounded down to a whole block, capped by the model's context."""
    length = estimate_max_model_len(
        available_bytes, spec, block_size, kv_cache_dtype, tp, pp, max_num_batched_tokens, rules=rules
    )
    if length == spec.derived_max_model_len or length < block_size:
        return length
    return length // block_size * block_size


def resolve_max_model_len(
    spec: ModelSpec, requested: str | int | None, available_bytes: int | None = None, **kv_args
) -> int:
    """None -> the config's derived length; `auto` / -1 -> the largest that fits; `8k` / `8K` / 8192 as given."""
    if requested is None:
        return spec.derived_max_model_len
    if str(requested).strip().lower() in ("auto", "-1"):
        if available_bytes is None:
            raise UsageError(
                "max_model_len 'auto' needs a KV-cache budget.", "Give a GPU or a memory size, or a number."
            )
        length = estimate_max_model_len(available_bytes, spec, **kv_args)
        if length < 1:
            raise UsageError(messages.CANNOT_AUTO_FIT)
        return length
    length = parse_human_int(requested, "max_model_len")
    if length < 1:
        raise UsageError(f"max_model_len must be positive, got {length}.", "Give e.g. 8192, 8k or auto.")
    return length


def check_parallel_sizes(spec: ModelSpec, tp: int = 1, pp: int = 1) -> None:
    """vLLM's divisibility rules for tensor and pipeline parallelism."""
    if tp < 1 or pp < 1:
        raise UsageError(f"parallel sizes must be >= 1 (got tp={tp}, pp={pp}).", "Use --tp 1 or more.")
    if spec.num_attention_heads % tp:
        raise UsageError(
            f"Total number of attention heads ({spec.num_attention_heads}) must be divisible by tensor "
            f"parallel size ({tp}).",
            f"Use a --tp that divides {spec.num_attention_heads}.",
        )
    kv = spec.num_key_value_heads
    if not spec.is_mla and (kv % tp if kv >= tp else tp % kv):
        raise UsageError(
            f"{kv} KV heads cannot be split over tensor parallel size {tp}.",
            f"Use a --tp that divides {kv} or a multiple of it.",
        )
    if pp > spec.num_hidden_layers:
        raise UsageError(
            f"pipeline parallel size {pp} exceeds the {spec.num_hidden_layers} layers.", "Use a smaller --pp."
        )
