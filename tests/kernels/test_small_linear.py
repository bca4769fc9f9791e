"""The small-batch linear kernel against its torch reference (the AVX-512 build and the portable loops),
and PackedLinear's choice between it and oneDNN's packed weight."""

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


@pytest.mark.skipif(
    not cpu_ops.small_linear_wins(),
    reason="PackedLinear keeps plain weights with AVX-512 (with AVX2 alone, panels: test_panel_linear.py)",
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_streams_the_plain_weight_up_to_its_row_limit_and_packs_the_rest(dtype, monkeypatch):
    if not cpu_linear.can_pack(torch.device("cpu"), dtype):
        pytest.skip("no oneDNN packing for this dtype here")
    linear = torch.nn.Linear(576, 160).to(dtype)
    packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
    calls = []
    original = cpu_ops.small_linear
    monkeypatch.setattr(cpu_ops, "small_linear", lambda *a: calls.append(len(a[0])) or original(*a))
    with torch.inference_mode():
        for shape in [(1, 576), (2, 2, 576), (4, 576), (5, 576), (64, 576), (65, 576)]:
            x = torch.randn(*shape).to(dtype)
            torch.testing.assert_close(packed(x), linear(x), **one_rounding_step(dtype))
    # rows, whatever the leading shape, up to this CPU's limit (with AVX-512: fp32 up to 64, bf16 up to 4)
    assert calls == [rows for rows in (1, 4, 4, 5, 64, 65) if rows <= cpu_ops.small_linear_rows(dtype)]
