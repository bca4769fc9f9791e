"""glibc malloc told to keep freed memory for the next step (mallopt), on the CPU engine.

torch takes every CPU tensor from malloc. By default glibc serves large blocks with fresh mmaps, or
trims the heap when they are freed, so each step's activations (a 2,048-token prefill of SmolLM2 in
fp32 writes 25 MB blocks) fault their pages in again: a page fault per 4 KiB. With the thresholds of
defaults.py, a block freed by one step is the memory the next one gets. Other C libraries (musl) have
no mallopt: nothing is changed there.
"""

import ctypes
import logging

from kvtool.engine.sizing.defaults import CPU_MALLOC_MMAP_THRESHOLD, CPU_MALLOC_TRIM_THRESHOLD

logger = logging.getLogger("kvtool.engine")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def keep_freed_memory() -> bool:
    """Whether the thresholds were set (False where the C library has no mallopt)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, CPU_MALLOC_MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, CPU_MALLOC_TRIM_THRESHOLD)
    if not done:
        logger.info("malloc kept its defaults: mallopt refused the thresholds")
    return bool(done)
