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


@pytest.fixture(scope="session")
def portable_library(tmp_path_factory):
    """The CPU kernels built without AVX-512 (the loops an AVX2 or ARM machine runs), once per session."""
    import ctypes
    import platform

    from kvtool.kernels import cpu_build

    compiler = cpu_build.c_compiler()
    if platform.machine() != "x86_64" or compiler is None:
        pytest.skip("-mno-avx512f needs an x86 C compiler")
    folder = tmp_path_factory.mktemp("portable")
    return cpu_build.with_signatures(ctypes.CDLL(str(cpu_build.build_library(compiler, folder, ("-mno-avx512f",)))))
