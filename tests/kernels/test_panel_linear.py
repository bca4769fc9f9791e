"""The column-panel linear kernel against its torch reference (this CPU's build, the AVX2 build and the
portable loops), the panel layout, and PackedLinear keeping only panels where they win (AVX2 without
AVX-512)."""

import pytest
import torch
from paged_cases import linear_case, one_rounding_step

from kvtool.kernels import cpu_linear, cpu_ops, reference

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")

DTYPES = [torch.float32, torch.bfloat16]
SHAPES = [(7, 48), (960, 576), (33, 1536), (100, 8)]  # n with and without a partial last panel, short k


def test_panels_hold_each_k_step_of_16_output_columns_and_zeros_past_the_last():
    weight = torch.arange(20 * 3, dtype=torch.float32).view(20, 3)
    panels = reference.pack_panels(weight)
    assert panels.shape == (2, 3, reference.PANEL_WIDTH)
    assert torch.equal(panels[1, 2, :4], weight[16:, 2]) and torch.equal(panels[0, :, 5], weight[5])
    assert not panels[1, :, 4:].any()


@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 13, 64, 300])  # tiles of 6 rows and every tail
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_kernel_matches_reference(rows, n, k, dtype, with_bias):
    x, weight, bias = linear_case(rows, n, k, dtype, with_bias)
    got = cpu_ops.panel_linear(x, reference.pack_panels(weight), n, bias)
    assert got.dtype == dtype and got.shape == (rows, n)
    torch.testing.assert_close(got, reference.small_linear(x, weight, bias), **one_rounding_step(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [576, 577])  # an odd k leaves the one-row loop a last k-step of its own
def test_one_row_alone_is_that_row_among_others_within_a_rounding_step(dtype, k):
    # a one-row call has a loop of its own, which sums each column's even and odd k-steps apart
    x, weight, bias = linear_case(7, 40, k, dtype, True)
    panels = reference.pack_panels(weight)
    alone = torch.cat([cpu_ops.panel_linear(x[i : i + 1], panels, 40, bias) for i in range(7)])
    torch.testing.assert_close(alone, cpu_ops.panel_linear(x, panels, 40, bias), **one_rounding_step(dtype))


def test_what_the_kernel_does_not_cover_goes_to_the_reference():
    x, weight, bias = linear_case(3, 24, 32, torch.float16, True)
    panels = reference.pack_panels(weight)
    torch.testing.assert_close(
        cpu_ops.panel_linear(x, panels, 24, bias), reference.panel_linear(x, panels, 24, bias), atol=0, rtol=0
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build,vectorized", [("avx2_library", 8), ("portable_library", 0)])
def test_the_avx2_and_portable_builds_match_the_reference(build, vectorized, dtype, request):
    library = request.getfixturevalue(build)
    assert library.kvtool_panel_linear_vectorized() == vectorized
    for rows, (n, k) in zip([1, 6, 9, 14], SHAPES):
        x, weight, bias = linear_case(rows, n, k, dtype, True, seed=5)
        panels, out = reference.pack_panels(weight), torch.empty(rows, n, dtype=dtype)
        code = cpu_ops.DTYPE_CODES[dtype]
        library.kvtool_panel_linear(
            x.data_ptr(), panels.data_ptr(), bias.data_ptr(), out.data_ptr(), rows, k, n, code, 2
        )
        torch.testing.assert_close(out, reference.small_linear(x, weight, bias), **one_rounding_step(dtype))


@pytest.mark.skipif(not cpu_ops.panel_linear_wins(), reason="panels are kept on AVX2 CPUs without AVX-512")
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_keeps_one_copy_as_panels_for_every_row_count(dtype, monkeypatch):
    linear = torch.nn.Linear(576, 160).to(dtype)
    packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
    assert packed.plain_weight is None and packed.packed_weight is None
    calls = []
    original = cpu_ops.panel_linear
    monkeypatch.setattr(cpu_ops, "panel_linear", lambda *a: calls.append(len(a[0])) or original(*a))
    with torch.inference_mode():
        for shape in [(1, 576), (2, 2, 576), (256, 576), (257, 576)]:
            x = torch.randn(*shape).to(dtype)
            torch.testing.assert_close(packed(x), linear(x), **one_rounding_step(dtype))
    assert calls == [1, 4, 256, 257]


@pytest.mark.parametrize("kernel", ["kvtool_panel_linear", "kvtool_quant_panel_linear", "kvtool_quant_amx_linear"])
def test_a_kernel_that_cannot_allocate_its_scratch_says_so_and_writes_nothing(kernel):
    """2**50 rows: the scratch allocation fails before x is read; the status is what cpu_ops raises on."""
    library = cpu_ops.compiled_library()
    out = torch.zeros(4)
    rows, k, n = 1 << 50, 64, 4
    if kernel == "kvtool_panel_linear":
        status = library.kvtool_panel_linear(None, None, None, out.data_ptr(), rows, k, n, 0, 2)
    else:
        status = getattr(library, kernel)(None, out.data_ptr(), rows, k, n, None, None, None, 4, 2)
    assert status == cpu_ops.STATUS_NO_MEMORY and not out.any()
    with pytest.raises(MemoryError, match="--max-num-batched-tokens"):
        cpu_ops.raise_if_out_of_memory(status, kernel, rows)
