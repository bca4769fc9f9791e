"""The quantized linear kernel on AMX-INT8 tiles against quant_linear's torch reference, and what runs where
the tiles are refused, not built or not worth it: quant_linear.c's loop, to the bit."""

import pytest
import torch
from test_quant_linear import random_weight

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.quant_linear import QuantLinear, pack_codes

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")
needs_tiles = pytest.mark.skipif(cpu_amx.quant_amx_rows() == 0, reason="no AMX-INT8 tiles (or no permission) here")


def case(rows, n, k, bits, with_mins, seed):
    g = torch.Generator().manual_seed(seed)
    codes, scales, mins = random_weight(n, k, bits, with_mins, g)
    codes[0, :32] = -128 if bits == 8 else 15  # the extreme codes, against activations all at -127
    x = torch.randn(rows, k, generator=g)
    x[0, :32] = -5.0
    return x, pack_codes(codes, bits), scales, mins


def within_fp32_rounding(expected):
    """The same exact integer dot per group as the reference; only the order of the fp32 sums differs."""
    return {"rtol": 1e-5, "atol": 1e-5 * expected.abs().max().item()}


@needs_tiles
@pytest.mark.parametrize("rows", [6, 16, 17, 33, 64, 128])  # the first row count on tiles, whole and partial tiles
@pytest.mark.parametrize("n,k", [(96, 320), (48, 352), (576, 1536)])  # 10 and 11 groups (pairs and a last one)
@pytest.mark.parametrize("bits,with_mins", [(4, True), (4, False), (8, False), (8, True)])
def test_kernel_matches_reference(rows, n, k, bits, with_mins):
    x, *weight = case(rows, n, k, bits, with_mins, rows + n + bits)
    got = cpu_amx.quant_amx_linear(x, *weight, bits)
    expected = reference.quant_linear(x, *weight, bits)
    assert got.shape == (rows, n)
    torch.testing.assert_close(got, expected, **within_fp32_rounding(expected))


@pytest.mark.parametrize("rows,n", [(1, 96), (5, 96), (33, 40)])  # below the tiles' rows; a width of 2.5 blocks
def test_what_tiles_do_not_take_is_quant_linear_itself(rows, n):
    x, *weight = case(rows, n, 320, 4, True, rows)
    assert torch.equal(cpu_amx.quant_amx_linear(x, *weight, 4), cpu_ops.quant_linear(x, *weight, 4))


@needs_tiles
def test_quant_linear_module_runs_on_tiles_from_their_rows_when_chosen(monkeypatch):
    x, codes, scales, mins = case(cpu_ops.QUANT_KERNEL_WINS_UP_TO, 96, 320, 4, True, 7)
    assert not QuantLinear(reference.unpack_codes(codes, 4), scales, mins, 4).on_tiles  # the default
    monkeypatch.setenv("KVTOOL_QUANT_TILES", "1")
    layer = QuantLinear(reference.unpack_codes(codes, 4), scales, mins, 4)
    assert layer.on_tiles and not layer.in_panels
    calls, original = [], cpu_amx.quant_amx_linear
    monkeypatch.setattr(cpu_amx, "quant_amx_linear", lambda x, *a: calls.append(len(x)) or original(x, *a))
    for rows in (1, 32, len(x)):
        expected = reference.quant_linear(x[:rows], codes, scales, mins, 4)
        torch.testing.assert_close(layer(x[:rows]), expected, **within_fp32_rounding(expected))
    assert calls == [1, 32, len(x)]


def test_a_refused_permission_keeps_quant_linear(amx_refused, monkeypatch):
    monkeypatch.setenv("KVTOOL_QUANT_TILES", "1")
    assert cpu_amx.quant_amx_rows() == 0 and not cpu_amx.quant_tiles_chosen()
    x, codes, scales, mins = case(32, 96, 320, 8, False, 9)
    assert not QuantLinear(reference.unpack_codes(codes, 8), scales, mins, 8).on_tiles
    assert torch.equal(
        cpu_amx.quant_amx_linear(x, codes, scales, mins, 8), cpu_ops.quant_linear(x, codes, scales, mins, 8)
    )


def test_a_build_without_amx_runs_quant_linear(no_amx_library):
    assert no_amx_library.kvtool_quant_amx_linear_built() == 0
    x, codes, scales, mins = case(32, 96, 320, 4, True, 11)
    out = torch.empty(32, 96)
    args = (32, 320, 96, codes.data_ptr(), scales.data_ptr(), mins.data_ptr(), 4, 2)
    assert no_amx_library.kvtool_quant_amx_linear(x.data_ptr(), out.data_ptr(), *args) == 0
    expected = reference.quant_linear(x, codes, scales, mins, 4)
    torch.testing.assert_close(out, expected, **within_fp32_rounding(expected))
