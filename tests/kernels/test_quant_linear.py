"""The quantized linear kernel against its torch reference, and the reference against the float matmul
of the weights it stands for (the only difference: activations rounded to int8 per group of 32)."""

import pytest
import torch

from kvtool.kernels import cpu_ops, reference
from kvtool.kernels.quant_linear import QuantLinear, pack_codes

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")


def random_weight(n, k, bits, with_mins, g):
    low, high = (0, 16) if bits == 4 else (-127, 128)
    codes = torch.randint(low, high, (n, k), generator=g)
    scales = torch.rand(n, k // 32, generator=g) * 0.02
    mins = -torch.rand(n, k // 32, generator=g) * 0.1 if with_mins else None
    return codes, scales, mins


@pytest.mark.parametrize("k", [256, 320, 352])  # 8, 10 and 11 groups of 32: blocks of 8 and the rest
@pytest.mark.parametrize("rows", [1, 3, 8, 13])
@pytest.mark.parametrize("bits,with_mins", [(4, True), (4, False), (8, False), (8, True)])
def test_kernel_matches_reference(rows, bits, with_mins, k):
    g = torch.Generator().manual_seed(rows * 10 + bits)
    codes, scales, mins = random_weight(96, k, bits, with_mins, g)
    packed = pack_codes(codes, bits)
    x = torch.randn(rows, k, generator=g)
    got = cpu_ops.quant_linear(x, packed, scales, mins, bits)
    expected = reference.quant_linear(x, packed, scales, mins, bits)
    # the same integer dot products; only the order of the fp32 sums of the groups differs
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("build", ["avx2_library", "portable_library"])
def test_the_avx2_and_portable_builds_match_the_reference(build, bits, request):
    """The library without AVX-512 (what an AVX2 machine runs) and without AVX2, on the same cases."""
    library = request.getfixturevalue(build)
    g = torch.Generator().manual_seed(20 + bits)
    codes, scales, mins = random_weight(96, 352, bits, True, g)
    packed, x = pack_codes(codes, bits), torch.randn(5, 352, generator=g)
    out = torch.empty(5, 96)
    library.kvtool_quant_linear(
        x.data_ptr(), out.data_ptr(), 5, 352, 96, packed.data_ptr(), scales.data_ptr(), mins.data_ptr(), bits, 2
    )
    expected = reference.quant_linear(x, packed, scales, mins, bits)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("bits", [4, 8])
def test_reference_is_the_matmul_of_the_dequantized_weight_up_to_int8_activations(bits):
    g = torch.Generator().manual_seed(bits)
    codes, scales, mins = random_weight(64, 1536, bits, True, g)
    packed = pack_codes(codes, bits)
    weight = reference.dequantize_codes(packed, scales, mins, bits)
    torch.testing.assert_close(weight, (codes.view(64, -1, 32) * scales[..., None] + mins[..., None]).flatten(1))
    x = torch.randn(4, 1536, generator=g)
    dense = x @ weight.T
    # int8 activations: each element off by at most half a step of amax / 127
    assert (reference.quant_linear(x, packed, scales, mins, bits) - dense).abs().max() < 0.01 * dense.abs().max()


def test_quant_linear_module_keeps_batch_shape_bias_and_dtype():
    g = torch.Generator().manual_seed(3)
    codes, scales, mins = random_weight(40, 64, 4, True, g)
    bias = torch.randn(40, generator=g)
    layer = QuantLinear(codes, scales, mins, 4, bias)
    x = torch.randn(2, 3, 64, generator=g)
    y = layer(x.bfloat16())
    assert y.shape == (2, 3, 40) and y.dtype == torch.bfloat16
    expected = reference.quant_linear(x.bfloat16().float().view(6, 64), pack_codes(codes, 4), scales, mins, 4) + bias
    torch.testing.assert_close(y.float().view(6, 40), expected, atol=2e-2, rtol=2e-2)


def test_quant_linear_module_keeps_its_codes_in_panels_where_they_apply_and_quantizes_x_at_every_row_count(
    monkeypatch,
):
    """On AVX2 CPUs without AVX-512 the codes live in panels only, for every row count; elsewhere they stay
    row by row for the int8 kernel, and beyond its rows the whole weight is dequantized for a matmul."""
    g = torch.Generator().manual_seed(4)
    codes, scales, mins = random_weight(40, 64, 4, True, g)
    bias, packed = torch.randn(40, generator=g), pack_codes(codes, 4)
    layer = QuantLinear(codes, scales, mins, 4, bias)
    in_panels = cpu_ops.panel_linear_wins()
    assert layer.in_panels == in_panels and layer.codes.shape == ((3, 16, 32) if in_panels else (40, 32))
    panel_rows = []
    original = cpu_ops.quant_panel_linear
    monkeypatch.setattr(cpu_ops, "quant_panel_linear", lambda x, *a: panel_rows.append(len(x)) or original(x, *a))
    limit = cpu_ops.QUANT_KERNEL_WINS_UP_TO
    x = torch.randn(limit + 1, 64, generator=g)
    for rows in (1, 9, limit):
        expected = reference.quant_linear(x[:rows], packed, scales, mins, 4) + bias
        torch.testing.assert_close(layer(x[:rows]), expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
    beyond = layer(x)
    if in_panels:
        expected = reference.quant_linear(x, packed, scales, mins, 4) + bias
        torch.testing.assert_close(beyond, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
    else:  # fp32 activations: within fp32 rounding of the dequantized matmul
        torch.testing.assert_close(beyond, x @ reference.dequantize_codes(packed, scales, mins, 4).T + bias)
    assert panel_rows == ([1, 9, limit, limit + 1] if in_panels else [])


def test_codes_in_panels_are_the_same_weights_16_columns_and_4_k_steps_at_a_time():
    g = torch.Generator().manual_seed(30)
    codes, scales, mins = random_weight(20, 64, 4, True, g)  # 20 columns: a second panel 4 wide
    panel_codes, panel_scales, panel_mins = reference.pack_quant_panels(pack_codes(codes, 4), scales, mins, 4)
    assert panel_codes.shape == (2, 16, 32) and panel_scales.shape == panel_mins.shape == (2, 2, 16)
    lanes = panel_codes[0, 5].view(8, 4)  # k-steps 20-23, one column's 4 codes side by side
    assert torch.equal(lanes & 15, codes[:8, 20:24].to(torch.uint8))  # columns 0-7: low nibbles
    assert torch.equal(lanes >> 4, codes[8:16, 20:24].to(torch.uint8))  # 8-15: high nibbles
    assert torch.equal(panel_scales[1, 1, :4], scales[16:, 1]) and not panel_scales[1, :, 4:].any()
    codes8, scales8, _ = random_weight(20, 64, 8, False, g)
    panel_codes8 = reference.pack_quant_panels(pack_codes(codes8, 8), scales8, None, 8)[0]
    assert panel_codes8.shape == (2, 16, 64)
    assert torch.equal(panel_codes8[1, 3].view(torch.int8).view(16, 4)[:4], codes8[16:, 12:16].to(torch.int8))


@pytest.mark.parametrize("rows", [1, 7, 33])
@pytest.mark.parametrize("n", [96, 40])  # whole panels, and a last one 8 wide
@pytest.mark.parametrize("bits,with_mins", [(4, True), (8, False)])
def test_codes_in_panels_give_the_int8_kernels_results(rows, n, bits, with_mins):
    g = torch.Generator().manual_seed(rows + n + bits)
    codes, scales, mins = random_weight(n, 320, bits, with_mins, g)
    packed, x = pack_codes(codes, bits), torch.randn(rows, 320, generator=g)
    panels = reference.pack_quant_panels(packed, scales, mins, bits)
    expected = reference.quant_linear(x, packed, scales, mins, bits)
    assert torch.equal(reference.quant_panel_linear(x, *panels, bits, n), expected)
    within_fp32_rounding = {"rtol": 1e-5, "atol": 1e-5 * expected.abs().max().item()}  # sums in another order
    torch.testing.assert_close(cpu_ops.quant_panel_linear(x, *panels, bits, n), expected, **within_fp32_rounding)


@pytest.mark.parametrize("bits,with_mins", [(4, True), (8, False)])
@pytest.mark.parametrize("build,vectorized", [("avx2_library", 8), ("portable_library", 0)])
def test_the_avx2_and_portable_builds_of_codes_in_panels_match_the_reference(
    build, vectorized, bits, with_mins, request
):
    library = request.getfixturevalue(build)
    assert library.kvtool_quant_panel_linear_vectorized() == vectorized
    g = torch.Generator().manual_seed(40 + bits)
    codes, scales, mins = random_weight(40, 352, bits, with_mins, g)
    codes[0, :32] = -128 if bits == 8 else 15  # the extremes a group's int16 / maddubs sums must hold
    panels = reference.pack_quant_panels(pack_codes(codes, bits), scales, mins, bits)
    for rows in (1, 9, 14):
        x, out = torch.randn(rows, 352, generator=g), torch.empty(rows, 40)
        x[0, :32] = -5.0  # every code of the group at -127
        library.kvtool_quant_panel_linear(
            x.data_ptr(), out.data_ptr(), rows, 352, 40, *(t if t is None else t.data_ptr() for t in panels), bits, 2
        )
        expected = reference.quant_panel_linear(x, *panels, bits, 40)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
