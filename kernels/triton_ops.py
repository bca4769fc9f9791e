"""The Triton implementations of the seven ops, gathered under the names `get_ops` looks up (the thread set-up
is the reference's: a CUDA step runs no CPU kernels)."""

from kvtool.kernels.decode_attention import paged_decode_attention
from kvtool.kernels.fused_moe import fused_moe
from kvtool.kernels.fused_ops import rms_norm, rotary_embedding, silu_and_mul
from kvtool.kernels.prefill_attention import prefill_attention
from kvtool.kernels.reference import flush_denormals
from kvtool.kernels.store_kv import store_kv

__all__ = [
    "store_kv",
    "paged_decode_attention",
    "prefill_attention",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "fused_moe",
    "flush_denormals",
]
