"""The decoder run on the Triton op set gives the hidden states it gives on the torch references:
a prefill of two prompts into an empty paged cache, then a decode step on top of it."""

import pytest
import torch

pytest.importorskip("triton")

from paged_cases import ops_from, run_two_steps  # noqa: E402

from kvtool.kernels import reference, triton_ops  # noqa: E402


def test_triton_ops_drive_the_model_like_the_references():
    for got, expected in zip(
        run_two_steps(ops_from(triton_ops, "triton")), run_two_steps(ops_from(reference, "torch"))
    ):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
