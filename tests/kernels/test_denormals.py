"""The engine's threads read and write subnormal floats as zero (cpu/denormals.c): the calling thread and
every thread of its OpenMP team."""

import threading

import pytest
import torch

from kvtool.kernels import cpu_ops

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")

SUBNORMAL = 1e-39  # below float32's smallest normal, 1.18e-38
ROWS = 64


def in_a_new_thread(fn):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", fn()))
    thread.start()
    thread.join()
    return result["value"]


def rows_kept_nonzero() -> int:
    """RMSNorm of rows of subnormals, split over the team: read as they are, each row comes out near
    SUBNORMAL / sqrt(eps), a normal float; read as zero, it comes out zero."""
    x = torch.full((ROWS, 1024), SUBNORMAL)  # enough for the kernel to use its team
    return int(cpu_ops.rms_norm(x, torch.ones(1024), 1e-6).count_nonzero(dim=1).gt(0).sum())


def test_flush_denormals_covers_the_thread_and_its_team():
    def probe():
        torch.set_num_threads(2)  # the team of this new thread, created from it (without the flush) below
        torch.set_flush_denormal(False)
        before = rows_kept_nonzero()
        cpu_ops.flush_denormals(2)
        return before, rows_kept_nonzero(), (torch.tensor([SUBNORMAL]) * 2).item()

    before, after, product = in_a_new_thread(probe)
    assert before == ROWS
    assert after == 0 and product == 0.0
