"""THE memory and length model (vLLM 0.33 v1 arithmetic): KV bytes, blocks, capacity, length checks.

`kvtool plan`, the engine's start-up and `kvtool diagnose` all size the KV cache through one
`KVCacheSpec`: the model, and the `KVLayout` made once from the request (or the log).
"""

from dataclasses import dataclass, replace

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
from kvtool.errors import StartupError, UsageError


@dataclass(frozen=True)
class KVRules:
    """What differs between vLLM releases in the KV arithmetic (the defaults are vLLM 0.33's at pp = 1)."""

    sliding_batches: int = 2  # batches of max_num_batched_tokens a sliding layer keeps beyond its window; 0: full
    null_block_in_check: bool = True  # 0.29+: the start-up check keeps one block back
    tokens_from_concurrency: bool = True  # 0.20.1+: logged tokens = int(concurrency x max_model_len)
    v0_check: bool = False  # V0: starts when max_model_len <= block_size x num_gpu_blocks (0.2.7+; before: any block)
    v0_length_check: bool = True


V033 = KVRules()


@dataclass(frozen=True)
class KVLayout:
    """How one GPU holds the KV cache, whatever the model: vLLM's block_size and cache dtype, the GPU's
    share of the KV heads (tp) and of the layers (pp), the tokens one step schedules (they bound what a
    sliding-window layer keeps), and the release's rules."""

    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_dtype: str = "auto"
    tp: int = 1
    pp: int = 1
    max_num_batched_tokens: int | None = None  # None: vLLM 0.33's default
    rules: KVRules = V033


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


@dataclass(frozen=True)
class KVCacheSpec:
    """A model's KV cache on one GPU under a layout: what a token, a block (vLLM's page) and one request
    cost, and what a budget buys. vLLM keeps one KVCacheSpec per layer; this one sums them over the layers
    of the pipeline stage that stores the most."""

    model: ModelSpec
    layout: KVLayout = KVLayout()

    def with_kv_cache_dtype(self, kv_cache_dtype: str) -> "KVCacheSpec":
        return replace(self, layout=replace(self.layout, kv_cache_dtype=kv_cache_dtype))

    @property
    def kv_heads_per_rank(self) -> int:
        """KV heads each tensor-parallel rank stores; heads are replicated when tp exceeds them."""
        return 1 if self.model.is_mla else max(1, self.model.num_key_value_heads // self.layout.tp)

    @property
    def layer_bytes_per_token(self) -> int:
        """One token in one attention layer: K and V heads, or MLA's single latent (no factor 2, no TP split)."""
        model = self.model
        dtype_bytes = kv_cache_dtype_bytes(self.layout.kv_cache_dtype, model.dtype)
        if model.is_mla:
            return (model.kv_lora_rank + model.qk_rope_head_dim) * dtype_bytes
        return 2 * self.kv_heads_per_rank * model.head_dim * dtype_bytes

    @property
    def stage_layer_counts(self) -> tuple[int, int]:
        """(full, sliding) attention layers on the pipeline stage that stores the most KV."""
        pp, kinds = self.layout.pp, self.model.layer_types
        base, extra = divmod(len(kinds), pp)
        stages, start = [], 0
        for stage in range(pp):
            layers = kinds[start : start + base + (stage < extra)]
            start += base + (stage < extra)
            stages.append((layers.count("full_attention"), layers.count("sliding_attention")))
        return max(stages, key=sum)

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one more cached token costs on this GPU, over every attention layer of its stage."""
        return sum(self.stage_layer_counts) * self.layer_bytes_per_token

    @property
    def block_bytes(self) -> int:
        """One block of block_size tokens across all attention layers of the GPU."""
        return self.layout.block_size * self.bytes_per_token

    def num_blocks(self, available_bytes: int) -> int:
        size = self.block_bytes
        return max(0, int(available_bytes) // size) if size else 0

    def request_bytes(self, max_model_len: int) -> int:
        """Worst-case KV of one request of max_model_len tokens; sliding layers keep only their window
        plus the tokens of the steps in flight (vLLM 0.33: two, with async scheduling)."""
        layout, window = self.layout, self.model.sliding_window
        full, sliding = self.stage_layer_counts
        page = layout.block_size * self.layer_bytes_per_token
        full_blocks = _cdiv(max_model_len, layout.block_size)
        if not sliding or not window or not layout.rules.sliding_batches:
            return (full + sliding) * full_blocks * page
        batched = layout.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
        window_tokens = min(window - 1 + layout.rules.sliding_batches * batched, max_model_len)
        return full * full_blocks * page + sliding * (_cdiv(window_tokens, layout.block_size) + 1) * page

    def fits(self, available_bytes: int, max_model_len: int) -> bool:
        """vLLM's start-up check: one max_model_len request (V1), or max_model_len tokens of blocks (V0)."""
        block, rules, block_size = self.block_bytes, self.layout.rules, self.layout.block_size
        if available_bytes <= 0 or not block:
            return False
        if rules.v0_check:
            return max_model_len <= available_bytes // block * block_size or (
                not rules.v0_length_check and available_bytes >= block
            )
        return self.request_bytes(max_model_len) <= available_bytes - block * rules.null_block_in_check

    def estimate_max_model_len(self, available_bytes: int, limit: int | None = None) -> int:
        """Largest length in [1, limit] (default: the model's context) whose request fits; 0 if none does."""
        size, rules, high = self.block_bytes, self.layout.rules, limit or self.model.derived_max_model_len
        if rules.v0_check:
            return min(int(available_bytes) // size * self.layout.block_size if size else 0, high)
        usable, low = available_bytes - size * rules.null_block_in_check, 0
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if self.request_bytes(middle) <= usable else (low, middle - 1)
        return low

    def safe_max_model_len(self, available_bytes: int) -> int:
        """The largest length that fits, rounded down to a whole block, capped by the model's context."""
        length, block_size = self.estimate_max_model_len(available_bytes), self.layout.block_size
        if length == self.model.derived_max_model_len or length < block_size:
            return length
        return length // block_size * block_size

    def plan(self, available_bytes: int, max_model_len: int) -> KVCachePlan:
        """Blocks, tokens, concurrency and the safe length for a KV budget."""
        num_blocks, size, rules = self.num_blocks(available_bytes), self.block_bytes, self.layout.rules
        request = self.request_bytes(max_model_len)
        concurrency = num_blocks * size / request if request else 0.0
        if rules.v0_check:  # V0 logs num_gpu_blocks x block_size / max_model_len
            concurrency = num_blocks * self.layout.block_size / max_model_len
        tokens = (
            int(concurrency * max_model_len) if rules.tokens_from_concurrency else num_blocks * self.layout.block_size
        )
        return KVCachePlan(
            available_bytes=int(available_bytes),
            block_size=self.layout.block_size,
            kv_bytes_per_token=self.bytes_per_token,
            block_bytes=size,
            num_blocks=num_blocks,
            max_model_len=max_model_len,
            request_bytes=request,
            max_concurrency=concurrency,
            kv_cache_tokens=tokens,
            safe_max_model_len=self.safe_max_model_len(available_bytes),
            fits=self.fits(available_bytes, max_model_len),
        )

    def check_fits(self, available_bytes: int, max_model_len: int) -> None:
        """Raise KVCacheTooSmallError, worded like vLLM 0.33, unless one max_model_len request fits."""
        if available_bytes <= 0:
            raise KVCacheTooSmallError(messages.no_memory_for_cache(), 0, int(available_bytes), 0)
        if self.fits(available_bytes, max_model_len):
            return
        needed = self.request_bytes(max_model_len)
        estimate = self.estimate_max_model_len(available_bytes, limit=max_model_len)
        raise KVCacheTooSmallError(
            messages.kv_cache_too_small(max_model_len, needed, available_bytes, estimate),
            needed,
            int(available_bytes),
            estimate,
        )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
