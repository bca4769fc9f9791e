"""Kernel tests run the Triton kernels through the interpreter when there is no GPU.

TRITON_INTERPRET must be set before any kernel module is imported (kernels are decorated then).
"""

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Test modules import the shared case builders in paged_cases.py (pytest runs with importlib mode).
sys.path.insert(0, os.path.dirname(__file__))
