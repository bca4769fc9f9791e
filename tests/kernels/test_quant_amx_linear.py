"""The quantized linear kernel on AMX-INT8 tiles against quant_panel_linear.c, bit for bit (and both against the
torch reference), and what runs where the tiles are refused, not built or not worth it: quant_panel_linear.c."""

import pytest
import torch
from test_quant_linear import random_weight

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.quant_linear import QuantLinear, pack_codes

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")
needs_tiles = pytest.mark.skipif(not cpu_amx.quant_tiles_granted(), reason="no AMX-INT8 tiles (or no permission)")


def case(rows, n, k, bits, with_mins, seed):
    """x [rows, k] and a weight [n, k] in panels (codes, scales, mins)."""
    g = torch.Generator().manual_seed(seed)
    codes, scales, mins = random_weight(n, k, bits, with_mins, g)
    codes[0, :32] = -128 if bits == 8 else 15  # the extreme codes, against activations all at -127
    x = torch.randn(rows, k, generator=g)
    x[0, :32] = -5.0
    return x, *reference.pack_quant_panels(pack_codes(codes, bits), scales, mins, bits)


@needs_tiles
@pytest.mark.parametrize("rows", [7, 10, 16, 17, 33, 128, 300])  # the first row counts on tiles, whole and partial
@pytest.mark.parametrize("n,k", [(96, 320), (40, 352), (576, 1536)])  # 10 and 11 groups; a last panel 8 wide
@pytest.mark.parametrize("bits,with_mins", [(4, True), (4, False), (8, False), (8, True)])
def test_kernel_gives_quant_panel_linears_bits(rows, n, k, bits, with_mins):
    x, *weight = case(rows, n, k, bits, with_mins, rows + n + bits)
    got = cpu_amx.quant_amx_linear(x, *weight, bits, n)
    assert got.shape == (rows, n) and torch.equal(got, cpu_ops.quant_panel_linear(x, *weight, bits, n))
    expected = reference.quant_panel_linear(x, *weight, bits, n)  # exact integer dots, fp32 sums in another order
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("rows,bits", [(1, 4), (9, 4), (6, 8)])  # below the tiles' rows
def test_what_tiles_do_not_take_is_quant_panel_linear_itself(rows, bits):
    x, *weight = case(rows, 40, 320, bits, True, rows)
    assert torch.equal(cpu_amx.quant_amx_linear(x, *weight, bits, 40), cpu_ops.quant_panel_linear(x, *weight, bits, 40))


@needs_tiles
def test_quant_linear_module_runs_on_tiles_where_they_are_granted(monkeypatch):
    g = torch.Generator().manual_seed(7)
    codes, scales, mins = random_weight(96, 320, 4, True, g)
    layer = QuantLinear(codes, scales, mins, 4)
    assert layer.on_tiles
    calls, original = [], cpu_amx.quant_amx_linear
    monkeypatch.setattr(cpu_amx, "quant_amx_linear", lambda x, *a: calls.append(len(x)) or original(x, *a))
    x = torch.randn(300, 320, generator=g)
    whole = layer(x)
    assert all(torch.equal(layer(x[:rows]), whole[:rows]) for rows in (1, 32))
    assert calls == [300, 1, 32]


def test_a_refused_permission_keeps_quant_panel_linear(amx_refused):
    assert not cpu_amx.quant_tiles_granted()
    x, *weight = case(32, 96, 320, 8, False, 9)
    assert not QuantLinear(torch.zeros(96, 320), torch.ones(96, 10), None, 8).on_tiles
    assert torch.equal(cpu_amx.quant_amx_linear(x, *weight, 8, 96), cpu_ops.quant_panel_linear(x, *weight, 8, 96))


def test_a_build_without_amx_runs_quant_panel_linear(no_amx_library):
    assert no_amx_library.kvtool_quant_amx_linear_built() == 0
    x, codes, scales, mins = case(32, 96, 320, 4, True, 11)
    out = torch.empty(32, 96)
    args = (32, 320, 96, codes.data_ptr(), scales.data_ptr(), mins.data_ptr(), 4, 2)
    assert no_amx_library.kvtool_quant_amx_linear(x.data_ptr(), out.data_ptr(), *args) == 0
    expected = reference.quant_panel_linear(x, codes, scales, mins, 4, 96)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())
