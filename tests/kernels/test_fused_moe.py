"""The fused MoE: the torch reference against every expert computed densely, and the Triton grouped
GEMM against the reference (through TRITON_INTERPRET=1 on CPU), with ragged expert loads and an
expert that receives no token."""

import pytest
import torch
import torch.nn.functional as F

from kvtool.kernels import reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def moe_case(num_tokens, num_experts, top_k, hidden=32, inter=48, idle_expert=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_tokens, hidden, generator=g)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=g) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=g) / inter**0.5
    logits = torch.randn(num_tokens, num_experts, generator=g) * 3
    if idle_expert is not None:
        logits[:, idle_expert] = -1e9
    weights, ids = logits.softmax(-1).topk(top_k, dim=-1)
    return x, w13, w2, weights / weights.sum(-1, keepdim=True), ids


def dense_moe(x, w13, w2, weights, ids):
    """Every expert on every token, combined with the routing weights (zero for unchosen experts)."""
    routing = torch.zeros(len(x), w13.shape[0], dtype=torch.float64).scatter_(1, ids, weights.double())
    gate, up = torch.einsum("th,eih->tei", x.double(), w13.double()).chunk(2, dim=-1)
    out = torch.einsum("tei,ehi->teh", F.silu(gate) * up, w2.double())
    return (out * routing[:, :, None]).sum(1)


CASES = [
    dict(num_tokens=1, num_experts=4, top_k=2),
    dict(num_tokens=37, num_experts=8, top_k=2, idle_expert=5),
    dict(num_tokens=20, num_experts=6, top_k=3, idle_expert=0),
    dict(num_tokens=70, num_experts=3, top_k=1),
]


@pytest.mark.parametrize("case", CASES)
def test_reference_equals_every_expert_computed_densely(case):
    x, w13, w2, weights, ids = moe_case(**case)
    if "idle_expert" in case:
        assert not (ids == case["idle_expert"]).any()
    counts = torch.bincount(ids.flatten(), minlength=case["num_experts"])
    assert case["num_tokens"] < 2 or counts.max() > counts.min()  # ragged loads
    expected = dense_moe(x, w13, w2, weights, ids).float()
    torch.testing.assert_close(reference.fused_moe(x, w13, w2, weights, ids), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_triton_grouped_gemm_matches_the_reference(case):
    pytest.importorskip("triton")
    from kvtool.kernels.fused_moe import fused_moe

    x, w13, w2, weights, ids = moe_case(**case)
    expected = reference.fused_moe(x, w13, w2, weights, ids)
    got = fused_moe(*(t.to(DEVICE) for t in (x, w13, w2, weights, ids)))
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


def test_align_by_expert_gives_each_row_block_one_expert():
    pytest.importorskip("triton")
    from kvtool.kernels.fused_moe import align_by_expert

    ids = torch.tensor([[2, 0], [2, 3], [0, 2]])
    sorted_ids, block_expert = align_by_expert(ids, num_experts=5, block_m=4)
    assert block_expert.tolist()[:3] == [0, 2, 3] and all(e == 5 for e in block_expert.tolist()[3:])
    assert sorted_ids.view(-1, 4)[:3].tolist() == [[1, 4, 6, 6], [0, 2, 5, 6], [3, 6, 6, 6]]
