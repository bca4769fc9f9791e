"""The embedded engine's start-up check of its KV cache: refused, in vLLM 0.33's words, unless one request of
max_model_len tokens fits (kv_cache.py does the arithmetic; plan and diagnose read it without raising)."""

from kvtool.engine.sizing import messages
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.errors import StartupError


class KVCacheTooSmallError(StartupError):
    """The KV cache cannot hold one request of max_model_len tokens (vLLM's start-up failure)."""

    def __init__(self, message: str, needed_bytes: int, available_bytes: int, estimated_max_model_len: int):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.estimated_max_model_len = estimated_max_model_len


def check_kv_cache(cache: KVCacheSpec, available_bytes: int, max_model_len: int) -> None:
    """Raise KVCacheTooSmallError unless one max_model_len request fits in `available_bytes`."""
    if available_bytes <= 0:
        raise KVCacheTooSmallError(messages.no_memory_for_cache(), 0, int(available_bytes), 0)
    if cache.fits(available_bytes, max_model_len):
        return
    needed = cache.checked.request_bytes(max_model_len)
    estimate = cache.estimate_max_model_len(available_bytes, limit=max_model_len)
    raise KVCacheTooSmallError(
        messages.kv_cache_too_small(max_model_len, needed, available_bytes, estimate),
        needed,
        int(available_bytes),
        estimate,
    )
