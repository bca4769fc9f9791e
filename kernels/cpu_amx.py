"""Linear layers on AMX tiles where the CPU has them and the kernel allows them: bf16 weights (cpu/amx_linear.c)
and GGUF-style codes in int8 (cpu/quant_amx_linear.c).

Linux hands a process AMX's 8 KiB of tile state only when asked: until a thread of the process has called
arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), the first tile instruction kills it with SIGILL (as a
llama.cpp built with its AMX kernels dies on such a CPU). The permission is the process's, asked for once
here before any kernel of kvtool's own touches a tile; a kernel that refuses it (an older kernel, a sandbox
that filters the call) leaves PackedLinear on the GEMM library's packed weight, which asks for itself, and
QuantLinear on quant_panel_linear.c at every row count.
"""

import ctypes
import functools
import logging
import platform

import torch

from kvtool.kernels import reference
from kvtool.kernels.cpu_build import cpu_flags, load_library
from kvtool.kernels.cpu_ops import (
    _covered,
    _ptr,
    _quant_covered,
    call_quant_kernel,
    quant_panel_linear,
    raise_if_out_of_memory,
)

logger = logging.getLogger("kvtool.kernels")

SYS_ARCH_PRCTL = 158  # x86-64's syscall number
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def request_amx_permission(feature: int = XFEATURE_XTILEDATA) -> int:
    """arch_prctl(ARCH_REQ_XCOMP_PERM, feature): 0 when granted, else the errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    status = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, feature)
    return 0 if status == 0 else ctypes.get_errno() or -1


@functools.cache
def amx_permitted(kind: str = "amx_bf16") -> bool:
    """Whether this process may run tile instructions of `kind` ("amx_bf16", "amx_int8"): the CPU has them and
    the kernel granted the tile state."""
    if platform.machine() != "x86_64" or kind not in cpu_flags():
        return False
    errno = request_amx_permission()
    if errno:
        logger.info("the kernel refused AMX tile state (errno %d); linear layers stay on the kernels without", errno)
    return errno == 0


def amx_linear_rows() -> int:
    """Up to how many rows PackedLinear runs bf16 on amx_linear here: 0 without the built kernel or the permission."""
    rows = _built_rows()
    return rows if rows and amx_permitted() else 0


@functools.cache
def _built_rows() -> int:
    """The rows the compiled amx_linear takes (0 where it was built without AMX): asked of the library once."""
    library = load_library()
    return 0 if library is None else library.kvtool_amx_linear_built()


def amx_linear(x, tiles, n, bias=None):
    """x [T, K] bf16 @ W^T + bias at up to amx_linear_rows() rows, W [n, K] packed by reference.pack_amx_tiles."""
    rows = len(x)
    if not (x.dtype == torch.bfloat16 and _covered(x, tiles, bias) and 0 < rows <= amx_linear_rows()):
        return reference.amx_linear(x, tiles, n, bias)
    x = x.contiguous()
    out = x.new_empty(rows, n)
    status = load_library().kvtool_amx_linear(
        _ptr(x), _ptr(tiles), _ptr(bias), _ptr(out), rows, x.shape[1], n, torch.get_num_threads()
    )
    raise_if_out_of_memory(status, "amx_linear", rows)
    return out


def quant_tiles_granted() -> bool:
    """Whether QuantLinear's codes go to quant_amx_linear here: the kernel built with AMX-INT8 and the permission."""
    return _quant_tiles_built() and amx_permitted("amx_int8")


@functools.cache
def _quant_tiles_built() -> bool:
    library = load_library()
    return library is not None and library.kvtool_quant_amx_linear_built() > 0


def quant_amx_linear(x, codes, scales, mins, bits, n):
    """cpu_ops.quant_panel_linear on int8 tiles, from the few rows where they win (MIN_ROWS_* in
    cpu/quant_amx_linear.c), with the same result bit for bit (its contract: reference.quant_panel_linear);
    below them, or where the tiles are not granted, cpu_ops.quant_panel_linear itself."""
    if not (_quant_covered(x) and quant_tiles_granted()):
        return quant_panel_linear(x, codes, scales, mins, bits, n)
    return call_quant_kernel(
        load_library().kvtool_quant_amx_linear, "quant_amx_linear", x, codes, scales, mins, bits, n
    )
