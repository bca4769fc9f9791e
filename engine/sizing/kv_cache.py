"""THE memory and length model (vLLM 0.33 v1 arithmetic): KV bytes, blocks, capacity, length checks.

`kvtool plan`, the engine's start-up and `kvtool diagnose` all size the KV cache through one
`KVCacheSpec`: the model, and the `KVLayout` made once from the request (or the log).
"""

from dataclasses import dataclass, replace
from functools import cached_property

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.defaults import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DTYPE_BYTES,
    FP8_KV_CACHE_DTYPES,
    KV_CACHE_DTYPES,
)
from kvtool.engine.sizing.hf_config import DTYPE_NAMES
from kvtool.engine.sizing.kv_layout import FULL, SLIDING, STATE, KVGroups, KVLayout, kv_groups, stage_kinds
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.errors import StartupError, UsageError


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
    """A model's KV cache on one GPU under a layout: what a token, a block (vLLM's page across a group of
    layers) and one request cost, and what a budget buys. vLLM keeps one KVCacheSpec per layer; this one
    holds the layers of one pipeline stage (by default the stage that stores the most)."""

    model: ModelSpec
    layout: KVLayout = KVLayout()

    def with_kv_cache_dtype(self, kv_cache_dtype: str) -> "KVCacheSpec":
        return replace(self, layout=replace(self.layout, kv_cache_dtype=kv_cache_dtype))

    @property
    def kv_heads_per_rank(self) -> int:
        """KV heads each tensor-parallel rank stores; heads are replicated when tp exceeds them."""
        return 1 if self.model.is_mla else max(1, self.model.num_key_value_heads // self.layout.tp)

    @cached_property
    def layer_bytes_per_token(self) -> int:
        """One token in one attention layer: K and V heads, or MLA's single latent (no factor 2, no TP split)."""
        model = self.model
        dtype_bytes = kv_cache_dtype_bytes(self.layout.kv_cache_dtype, model.dtype)
        if model.is_mla:
            return (model.kv_lora_rank + model.qk_rope_head_dim) * dtype_bytes
        return 2 * self.kv_heads_per_rank * model.head_dim * dtype_bytes

    @cached_property
    def kinds(self) -> tuple[str, ...]:
        """The layer kinds of this GPU's pipeline stage."""
        return stage_kinds(self.model.layer_types, self.layout)

    @cached_property
    def stage_layer_counts(self) -> tuple[int, int]:
        """(full, sliding) attention layers on this GPU's stage."""
        return self.kinds.count(FULL), self.kinds.count(SLIDING)

    @cached_property
    def groups(self) -> KVGroups:
        return kv_groups(self.kinds, self.layout.rules, self.model.sliding_window)

    @cached_property
    def bytes_per_token(self) -> int:
        """KV bytes one more cached token costs on this GPU, over every attention layer of its stage."""
        return sum(self.stage_layer_counts) * self.layer_bytes_per_token

    @cached_property
    def block_size(self) -> int:
        """Tokens per block: the layout's, enlarged for hybrid models until one attention page holds one
        mamba state (platforms/interface.py `_align_hybrid_block_size`, 16-token kernel alignment)."""
        size, state = self.layout.block_size, self._state_bytes
        if not state or not self.layer_bytes_per_token or not self.stage_layer_counts[0] + self.stage_layer_counts[1]:
            return size
        align = max(16, size)
        return max(size, align * _cdiv(state, align * self.layer_bytes_per_token))

    @cached_property
    def page_bytes(self) -> int:
        """One block of one layer (vLLM's page_size_bytes; a mamba page is padded to it)."""
        attention = self.block_size * self.layer_bytes_per_token if sum(self.stage_layer_counts) else 0
        return max(attention, self._state_bytes)

    @cached_property
    def block_bytes(self) -> int:
        """One block of the pool: a page of every layer the pool block spans."""
        return self.page_bytes * self.groups.size

    @cached_property
    def _state_bytes(self) -> int:
        state, rules = self.model.mamba_state, self.layout.rules
        if state is None or not rules.hybrid_groups or STATE not in dict(self.groups.layers):
            return 0
        return state.page_bytes(self.layout.tp, kv_cache_dtype_bytes("auto", self.model.dtype))

    def num_blocks(self, available_bytes: int) -> int:
        size = self.block_bytes
        return max(0, int(available_bytes) // size) if size else 0

    def request_blocks(self, max_model_len: int) -> float:
        """Pool blocks one request of max_model_len tokens takes (fractional without vLLM's groups)."""
        size = self.groups.size
        return sum(layers * self._blocks(kind, max_model_len) for kind, layers in self.groups.layers) / size

    def _blocks(self, kind: str, max_model_len: int) -> int:
        """Blocks of one layer of `kind` for one request: the whole length (full attention), the window plus
        the tokens of the steps in flight (vLLM 0.33: two, with async scheduling), or the state's blocks."""
        rules, block_size, window = self.layout.rules, self.block_size, self.model.sliding_window
        if kind == STATE:
            return rules.state_blocks_per_request
        if kind == SLIDING:
            batched = self.layout.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
            return _cdiv(min(window - 1 + rules.sliding_batches * batched, max_model_len), block_size) + 1
        return _cdiv(max_model_len, block_size)

    def request_bytes(self, max_model_len: int) -> int:
        """Worst-case KV of one request of max_model_len tokens on this GPU."""
        return round(self.request_blocks(max_model_len) * self.block_bytes)

    @cached_property
    def _checked(self) -> "KVCacheSpec":
        """What the start-up check sizes: this stage, or every stage's layers together (0.14 - 0.16)."""
        if self.layout.rules.whole_model_check and self.layout.pp > 1:
            return replace(self, layout=replace(self.layout, pp=1, stage=None, partition=None))
        return self

    def fits(self, available_bytes: int, max_model_len: int) -> bool:
        """vLLM's start-up check: one max_model_len request (V1), or max_model_len tokens of blocks (V0)."""
        block, rules, block_size = self.block_bytes, self.layout.rules, self.block_size
        if available_bytes <= 0 or not block:
            return False
        if rules.v0_check:
            return max_model_len <= available_bytes // block * block_size or (
                not rules.v0_length_check and available_bytes >= block
            )
        return self._checked.request_bytes(max_model_len) <= available_bytes - block * rules.null_block_in_check

    def estimate_max_model_len(self, available_bytes: int, limit: int | None = None) -> int:
        """Largest length in [1, limit] (default: the model's context) whose request fits; 0 if none does."""
        size, rules, high = self.block_bytes, self.layout.rules, limit or self.model.derived_max_model_len
        if rules.v0_check:
            return min(int(available_bytes) // size * self.block_size if size else 0, high)
        usable, low, checked = available_bytes - size * rules.null_block_in_check, 0, self._checked
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if checked.request_bytes(middle) <= usable else (low, middle - 1)
        return low

    def safe_max_model_len(self, available_bytes: int) -> int:
        """The largest length that fits, rounded down to a whole block, capped by the model's context."""
        length, block_size = self.estimate_max_model_len(available_bytes), self.block_size
        if length == self.model.derived_max_model_len or length < block_size:
            return length
        return length // block_size * block_size

    def plan(self, available_bytes: int, max_model_len: int) -> KVCachePlan:
        """Blocks, tokens, concurrency and the safe length for a KV budget."""
        num_blocks, rules, block_size = self.num_blocks(available_bytes), self.layout.rules, self.block_size
        request_blocks = self.request_blocks(max_model_len)
        concurrency = num_blocks / request_blocks if request_blocks else 0.0
        if rules.v0_check:  # V0 logs num_gpu_blocks x block_size / max_model_len
            concurrency = num_blocks * block_size / max_model_len
        tokens = (
            int(concurrency * max_model_len)
            if rules.tokens_from_concurrency
            else num_blocks // max(1, self.groups.count) * block_size
        )
        return KVCachePlan(
            available_bytes=int(available_bytes),
            block_size=block_size,
            kv_bytes_per_token=self.bytes_per_token,
            block_bytes=self.block_bytes,
            num_blocks=num_blocks,
            max_model_len=max_model_len,
            request_bytes=self._checked.request_bytes(max_model_len),
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
        needed = self._checked.request_bytes(max_model_len)
        estimate = self.estimate_max_model_len(available_bytes, limit=max_model_len)
        raise KVCacheTooSmallError(
            messages.kv_cache_too_small(max_model_len, needed, available_bytes, estimate),
            needed,
            int(available_bytes),
            estimate,
        )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
