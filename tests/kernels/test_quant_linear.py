"""The quantized linear kernel (codes in column panels) against its torch reference, and the reference against
the float matmul of the weights it stands for (the only difference: activations rounded to int8 per group of
32)."""

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


def test_quant_linear_module_keeps_its_codes_in_panels_and_a_rows_output_does_not_depend_on_its_batch():
    """Codes live in panels on every CPU, and every row count runs int8 kernels with one arithmetic (panels, or
    AMX-INT8 tiles from a few rows): a row alone and the same row in a batch of 200 give the same bits."""
    g = torch.Generator().manual_seed(4)
    codes, scales, mins = random_weight(40, 64, 4, True, g)
    bias, packed = torch.randn(40, generator=g), pack_codes(codes, 4)
    layer = QuantLinear(codes, scales, mins, 4, bias)
    assert layer.codes.shape == (3, 16, 32)
    x = torch.randn(200, 64, generator=g)
    whole = layer(x)
    expected = reference.quant_linear(x, packed, scales, mins, 4) + bias
    torch.testing.assert_close(whole, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
    for rows in (1, 3, 5, 7, 8, 9, 17, 199):
        assert torch.equal(layer(x[:rows]), whole[:rows]), rows


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


@pytest.mark.parametrize("k", [256, 320, 352])  # 8, 10 and 11 groups of 32
@pytest.mark.parametrize("rows", [1, 7, 33])
@pytest.mark.parametrize("n", [96, 40])  # whole panels, and a last one 8 wide
@pytest.mark.parametrize("bits,with_mins", [(4, True), (4, False), (8, False), (8, True)])
def test_codes_in_panels_give_the_int8_kernels_results(rows, n, bits, with_mins, k):
    g = torch.Generator().manual_seed(rows + n + bits + k)
    codes, scales, mins = random_weight(n, k, bits, with_mins, g)
    packed, x = pack_codes(codes, bits), torch.randn(rows, k, generator=g)
    panels = reference.pack_quant_panels(packed, scales, mins, bits)
    expected = reference.quant_linear(x, packed, scales, mins, bits)
    assert torch.equal(reference.quant_panel_linear(x, *panels, bits, n), expected)
    within_fp32_rounding = {"rtol": 1e-5, "atol": 1e-5 * expected.abs().max().item()}  # sums in another order
    torch.testing.assert_close(cpu_ops.quant_panel_linear(x, *panels, bits, n), expected, **within_fp32_rounding)


@pytest.mark.parametrize("bits,with_mins", [(4, True), (8, False), (8, True)])
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
        if vectorized:  # AVX2's body and this CPU's own (AVX-512 VNNI's where it has it): the same arithmetic
            assert torch.equal(out, cpu_ops.quant_panel_linear(x, *panels, bits, 40))
