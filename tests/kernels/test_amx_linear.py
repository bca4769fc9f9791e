"""The bf16 AMX-tile linear kernel against its torch reference, the tile layout, and what happens where the
kernel refuses the process AMX's tile state: PackedLinear keeps the kernels it had before."""

import pytest
import torch
from paged_cases import linear_case, one_rounding_step

from kvtool.kernels import cpu_amx, cpu_linear, cpu_ops, reference

pytestmark = pytest.mark.skipif(not cpu_ops.available(), reason="no C compiler to build the CPU kernels")
needs_amx = pytest.mark.skipif(cpu_amx.amx_linear_rows() == 0, reason="no AMX tiles (or no permission) here")
SHAPES = [(16, 32), (960, 576), (48, 1536)]  # one tile; SmolLM2's qkv; k of 48 tiles


@pytest.mark.parametrize("n,k", SHAPES)
def test_the_tile_layout_holds_every_weight_once(n, k):
    x, weight, bias = linear_case(3, n, k, torch.bfloat16, True)
    tiles = reference.pack_amx_tiles(weight)
    assert tiles.shape == (n // 16, k // 32, 16, 16, 2)
    assert torch.equal(tiles[1 % (n // 16), 0, 5, 7], weight[16 * (1 % (n // 16)) + 7, 10:12])
    assert torch.equal(reference.amx_linear(x, tiles, n, bias), reference.small_linear(x, weight, bias))


@needs_amx
@pytest.mark.parametrize("rows", [1, 5, 16, 17, 33, 64])  # whole and partial row tiles, up to four
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_kernel_matches_reference(rows, n, k, with_bias):
    x, weight, bias = linear_case(rows, n, k, torch.bfloat16, with_bias)
    tiles = reference.pack_amx_tiles(weight)
    got = cpu_amx.amx_linear(x, tiles, n, bias)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, n)
    torch.testing.assert_close(got, reference.amx_linear(x, tiles, n, bias), **one_rounding_step(torch.bfloat16))


@needs_amx
def test_packed_linear_runs_bf16_on_tiles_up_to_their_rows_then_onednn(monkeypatch):
    linear = torch.nn.Linear(576, 160).to(torch.bfloat16)
    packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
    assert packed.amx_tiles is not None and packed.plain_weight is None and packed.packed_weight is not None
    calls = []
    original = cpu_amx.amx_linear
    monkeypatch.setattr(cpu_amx, "amx_linear", lambda *a: calls.append(len(a[0])) or original(*a))
    with torch.inference_mode():
        for rows in (1, 4, 64, 65):
            x = torch.randn(rows, 576).to(torch.bfloat16)
            torch.testing.assert_close(packed(x), linear(x), **one_rounding_step(torch.bfloat16))
    assert calls == [1, 4, 64]


def test_the_permission_is_asked_of_the_kernel_itself():
    """The real arch_prctl: a feature that is not one gets EINVAL, and on a CPU with AMX the tiles are granted."""
    assert cpu_amx.request_amx_permission(feature=1) != 0  # x87 state is no dynamic feature
    if "amx_bf16" in cpu_amx.cpu_flags():
        assert cpu_amx.request_amx_permission() == 0


def test_a_refused_permission_keeps_the_kernels_of_before(amx_refused):
    assert cpu_amx.amx_linear_rows() == 0
    linear = torch.nn.Linear(576, 160).to(torch.bfloat16)
    packed = cpu_linear.PackedLinear(linear.weight, linear.bias)
    assert packed.amx_tiles is None and packed.amx_rows == 0
    assert cpu_linear.kernel_rows(torch.bfloat16) == max(
        cpu_ops.small_linear_rows(torch.bfloat16), cpu_ops.panel_linear_rows(torch.bfloat16)
    )
    x, weight, bias = linear_case(8, 960, 576, torch.bfloat16, True)
    tiles = reference.pack_amx_tiles(weight)
    assert torch.equal(cpu_amx.amx_linear(x, tiles, 960, bias), reference.amx_linear(x, tiles, 960, bias))
    with torch.inference_mode():
        torch.testing.assert_close(packed(x[:, :576]), linear(x[:, :576]), **one_rounding_step(torch.bfloat16))


def test_a_build_without_amx_reports_no_rows(no_amx_library):
    assert no_amx_library.kvtool_amx_linear_built() == 0
