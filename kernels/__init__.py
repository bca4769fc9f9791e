"""Attention, KV-cache and fused ops: Triton kernels on CUDA; on CPU C kernels where they can be
built and apply, the plain-PyTorch references for the rest.

`get_ops(device)` is how the engine reaches a backend: the seven ops the models call and the thread set-up the
model runner does (every set has them, with the same signatures), and on the C kernels' backend their one-call
decode step. The linear layers that keep packed or quantized weights (cpu_linear.py, quant_linear.py) call
their kernels themselves.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

OP_NAMES = (
    "store_kv",
    "paged_decode_attention",
    "prefill_attention",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "fused_moe",
    "flush_denormals",
)


@dataclass(frozen=True)
class KernelOps:
    """One implementation of each op; `backend` is "triton", "cpu" (C kernels) or "torch"."""

    backend: str
    store_kv: Callable
    paged_decode_attention: Callable
    prefill_attention: Callable
    rms_norm: Callable
    rotary_embedding: Callable
    silu_and_mul: Callable
    fused_moe: Callable
    flush_denormals: Callable  # subnormals read and written as zero by the calling thread and its team
    decode_step: ModuleType | None = None  # the C one-call decode step (cpu_decode_step.py); None elsewhere


def get_ops(device) -> KernelOps:
    """Triton kernels for a CUDA device when triton imports; on CPU the C kernels when they build;
    the torch references otherwise."""
    if _device_type(device) == "cuda" and _triton_available():
        from kvtool.kernels import triton_ops

        return _ops_from("triton", triton_ops)
    if _device_type(device) == "cpu":
        from kvtool.kernels import cpu_ops

        if cpu_ops.available():
            from kvtool.kernels import cpu_decode_step

            return replace(_ops_from("cpu", cpu_ops), decode_step=cpu_decode_step)
    from kvtool.kernels import reference

    return _ops_from("torch", reference)


def _ops_from(backend, module) -> KernelOps:
    return KernelOps(backend, *(getattr(module, name) for name in OP_NAMES))


def _device_type(device) -> str:
    return getattr(device, "type", None) or str(device).split(":")[0]


def _triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
