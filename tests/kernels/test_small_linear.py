"""The small-batch linear kernel against its torch reference (the AVX-512 build and the portable loops),
and PackedLinear's choice between a small-rows kernel (it, or column panels) and oneDNN's packed weight."""

import pytest
import torch
from paged_cases import linear_case, one_rounding_step

from kvtool.kernels import cpu_linear, cpu_ops, reference

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")

DTYPES = [torch.float32, torch.bfloat16]
SHAPES = [(7, 48), (960, 576), (33, 1536)]  # n not a multiple of the 4-row tile; k with and without a 32 tail


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 19, 64])  # groups of 4 rows and the tails
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_kernel_matches_reference(rows, n, k, dtype, with_bias):
    x, weight, bias = linear_case(rows, n, k, dtype, with_bias)
    got = cpu_ops.small_linear(x, weight, bias)
    assert got.dtype == dtype and got.shape == (rows, n)
    torch.testing.assert_close(got, reference.small_linear(x, weight, bias), **one_rounding_step(dtype))


@pytest.mark.parametrize("rows,k", [(65, 64), (2, 40)])  # too many rows; k not a multiple of 16
def test_what_the_kernel_does_not_cover_goes_to_the_reference(rows, k):
    x, weight, bias = linear_case(rows, 24, k, torch.float32, True)
    torch.testing.assert_close(
        cpu_ops.small_linear(x, weight, bias), reference.small_linear(x, weight, bias), atol=0, rtol=0
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", ["avx2_library", "portable_library"])
def test_the_builds_without_avx512_match_the_reference(build, dtype, request):
    library = request.getfixturevalue(build)
    assert library.kvtool_small_linear_vectorized() == 0  # without AVX-512: panels (AVX2) or oneDNN
    for rows, (n, k) in zip([1, 6, 9], SHAPES):
        x, weight, bias = linear_case(rows, n, k, dtype, True, seed=5)
        out = torch.empty(rows, n, dtype=dtype)
        code = cpu_ops.DTYPE_CODES[dtype]
        library.kvtool_small_linear(
            x.data_ptr(), weight.data_ptr(), bias.data_ptr(), out.data_ptr(), rows, k, n, code, 2
        )
        torch.testing.assert_close(out, reference.small_linear(x, weight, bias), **one_rounding_step(dtype))


SMALL_ROWS_KERNELS = {"small_linear": cpu_ops.small_linear_rows, "panel_linear": cpu_ops.panel_linear_rows}


@pytest.mark.parametrize("kernel", SMALL_ROWS_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_sends_a_few_rows_to_its_kernel_and_the_rest_to_onednn(kernel, dtype, monkeypatch, amx_refused):
    """Where AMX tiles are refused (or absent): bf16 on AMX tiles is test_amx_linear.py's."""
    limit = SMALL_ROWS_KERNELS[kernel](dtype)
    if not 0 < limit <= cpu_ops.SMALL_LINEAR_MAX_ROWS or not cpu_linear.can_pack(torch.device("cpu"), dtype):
        pytest.skip(f"PackedLinear keeps no copy for {kernel} beside oneDNN's packed weight on this CPU")
    linear = torch.nn.Linear(576, 160).to(dtype)
    packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
    assert packed.packed_weight is not None
    calls = []
    original = getattr(cpu_ops, kernel)
    monkeypatch.setattr(cpu_ops, kernel, lambda *a: calls.append(len(a[0])) or original(*a))
    row_counts = sorted({1, 4, limit, limit + 1, 64, 65})
    with torch.inference_mode():
        for rows in row_counts:
            x = torch.randn(rows, 576).to(dtype)
            torch.testing.assert_close(packed(x), linear(x), **one_rounding_step(dtype))
        packed(torch.randn(2, 2, 576).to(dtype))  # rows whatever the leading shape
    # AVX-512 with AMX: small_linear, fp32 up to 64 rows, bf16 up to 4; without AMX: panels, fp32 up to 8, bf16 4
    assert calls == [rows for rows in row_counts if rows <= limit] + [4] * (4 <= limit)


def test_the_small_rows_kernel_is_one_or_the_other():
    for dtype in DTYPES:
        assert not (cpu_ops.small_linear_rows(dtype) and cpu_ops.panel_linear_rows(dtype))
