"""Kernel tests run the Triton kernels through the interpreter when there is no GPU.

TRITON_INTERPRET must be set before any kernel module is imported (kernels are decorated then).
"""

import os
import sys

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Test modules import the shared case builders in paged_cases.py (pytest runs with importlib mode).
sys.path.insert(0, os.path.dirname(__file__))


def _library_without(tmp_path_factory, flag: str):
    """The CPU kernels built with `flag` taking an instruction set away, for the loops other CPUs run."""
    import ctypes
    import platform

    from kvtool.kernels import cpu_build

    compiler = cpu_build.c_compiler()
    if platform.machine() != "x86_64" or compiler is None:
        pytest.skip(f"{flag} needs an x86 C compiler")
    folder = tmp_path_factory.mktemp(flag.lstrip("-"))
    return cpu_build.with_signatures(ctypes.CDLL(str(cpu_build.build_library(compiler, folder, (flag,)))))


def cpu_has(*flags: str) -> bool:
    """Whether this CPU runs these instruction sets (/proc/cpuinfo's names, e.g. "avx2", "fma")."""
    from kvtool.kernels import cpu_build

    return set(flags) <= cpu_build.cpu_flags()


@pytest.fixture(scope="session")
def avx2_library(tmp_path_factory):
    """The CPU kernels without AVX-512: what an AVX2 laptop or server runs, once per session."""
    if not cpu_has("avx2", "fma"):
        pytest.skip("this CPU has no AVX2 and FMA")
    return _library_without(tmp_path_factory, "-mno-avx512f")


@pytest.fixture(scope="session")
def portable_library(tmp_path_factory):
    """The CPU kernels without AVX2 (nor AVX-512): the plain loops an older x86 or an ARM machine runs."""
    return _library_without(tmp_path_factory, "-mno-avx2")


@pytest.fixture(scope="session")
def no_amx_library(tmp_path_factory):
    """The CPU kernels without AMX tiles: what an AVX-512 CPU before them (or AMD's) runs."""
    return _library_without(tmp_path_factory, "-mno-amx-tile")


@pytest.fixture
def amx_refused(monkeypatch):
    """The kernel answers arch_prctl(ARCH_REQ_XCOMP_PERM) with EPERM, as a sandbox that filters it would."""
    from kvtool.kernels import cpu_amx

    monkeypatch.setattr(cpu_amx, "request_amx_permission", lambda: 1)
    cpu_amx.amx_permitted.cache_clear()
    yield
    cpu_amx.amx_permitted.cache_clear()
