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
    expected = reference.quant_linear(x.bfloat16().float().view(6, 64), layer.codes, scales, mins, 4) + bias
    torch.testing.assert_close(y.float().view(6, 40), expected, atol=2e-2, rtol=2e-2)


def test_quant_linear_module_takes_the_int8_kernel_up_to_its_rows_and_fp32_activations_beyond(monkeypatch):
    """Beyond the int8 kernel's rows x stays fp32: the codes in panels where they are kept (AVX2), else the
    whole weight dequantized for a matmul."""
    g = torch.Generator().manual_seed(4)
    codes, scales, mins = random_weight(40, 64, 4, True, g)
    bias = torch.randn(40, generator=g)
    layer = QuantLinear(codes, scales, mins, 4, bias)
    weight = reference.dequantize_codes(layer.codes, scales, mins, 4)
    panel_rows = []
    original = cpu_ops.quant_panel_linear
    monkeypatch.setattr(cpu_ops, "quant_panel_linear", lambda x, *a: panel_rows.append(len(x)) or original(x, *a))
    int8_rows = cpu_ops.quant_kernel_rows()
    x = torch.randn(int8_rows + 300, 64, generator=g)
    for rows in (int8_rows + 1, len(x)):  # fp32 activations: within fp32 rounding of the dequantized matmul
        torch.testing.assert_close(layer(x[:rows]), x[:rows] @ weight.T + bias)
    assert panel_rows == ([int8_rows + 1, len(x)] if cpu_ops.panel_linear_wins() else [])
    decode = x[:int8_rows]
    expected = reference.quant_linear(decode, layer.codes, scales, mins, 4) + bias
    torch.testing.assert_close(layer(decode), expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


def test_codes_in_panels_are_the_same_weights_16_columns_at_a_time():
    g = torch.Generator().manual_seed(30)
    codes, scales, mins = random_weight(20, 64, 4, True, g)  # 20 columns: a second panel 4 wide
    panel_codes, panel_scales, panel_mins = reference.pack_quant_panels(pack_codes(codes, 4), scales, mins, 4)
    assert panel_codes.shape == (2, 64, 8) and panel_scales.shape == panel_mins.shape == (2, 2, 16)
    assert torch.equal(panel_codes[0, 5] & 15, codes[:8, 5].to(torch.uint8))  # columns 0-7: low nibbles
    assert torch.equal(panel_codes[0, 5] >> 4, codes[8:16, 5].to(torch.uint8))  # 8-15: high nibbles
    assert torch.equal(panel_scales[1, 1, :4], scales[16:, 1]) and not panel_scales[1, :, 4:].any()


@pytest.mark.parametrize("rows", [1, 7, 33])
@pytest.mark.parametrize("n", [96, 40])  # whole panels, and a last one 8 wide
@pytest.mark.parametrize("bits,with_mins", [(4, True), (8, False)])
def test_codes_in_panels_match_the_dequantized_matmul(rows, n, bits, with_mins):
    g = torch.Generator().manual_seed(rows + n + bits)
    codes, scales, mins = random_weight(n, 320, bits, with_mins, g)
    packed, x = pack_codes(codes, bits), torch.randn(rows, 320, generator=g)
    panels = reference.pack_quant_panels(packed, scales, mins, bits)
    dense = x @ reference.dequantize_codes(packed, scales, mins, bits).T
    within_fp32_rounding = {"rtol": 1e-5, "atol": 1e-5 * dense.abs().max().item()}  # sums in another order
    torch.testing.assert_close(reference.quant_panel_linear(x, *panels, bits, n), dense, **within_fp32_rounding)
    torch.testing.assert_close(cpu_ops.quant_panel_linear(x, *panels, bits, n), dense, **within_fp32_rounding)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("build", ["avx2_library", "portable_library"])
def test_the_avx2_and_portable_builds_of_codes_in_panels_match_the_reference(build, bits, request):
    library = request.getfixturevalue(build)
    g = torch.Generator().manual_seed(40 + bits)
    codes, scales, mins = random_weight(40, 352, bits, True, g)
    x, out = torch.randn(9, 352, generator=g), torch.empty(9, 40)
    panels = reference.pack_quant_panels(pack_codes(codes, bits), scales, mins, bits)
    library.kvtool_quant_panel_linear(
        x.data_ptr(), out.data_ptr(), 9, 352, 40, *(t.data_ptr() for t in panels), bits, 2
    )
    expected = reference.quant_panel_linear(x, *panels, bits, 40)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
