"""Sliding windows and logit soft-capping: the reference, the C decode kernel and the Triton kernels
against a token-by-token softmax (Triton through TRITON_INTERPRET=1 on CPU)."""

import pytest
import torch
from paged_cases import filled_caches

from kvtool.kernels import cpu_ops, reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CASES = [(None, None), (24, None), (None, 5.0), (17, 3.0)]  # (sliding_window, logits_soft_cap)


def naive(q, k, v, scale, pos, window, cap):
    """q [Hq, D] at position `pos` over k/v [S, Hkv, D]."""
    group = q.shape[0] // k.shape[1]
    first = 0 if window is None else max(0, pos + 1 - window)
    out = torch.empty(q.shape, dtype=torch.float64)
    for h in range(q.shape[0]):
        keys, vals = k[first : pos + 1, h // group].double(), v[first : pos + 1, h // group].double()
        scores = keys @ q[h].double() * scale
        if cap:
            scores = torch.tanh(scores / cap) * cap
        out[h] = torch.softmax(scores, 0) @ vals
    return out


def decode_implementations():
    impls = [reference.paged_decode_attention]
    if cpu_ops.available():
        impls.append(cpu_ops.paged_decode_attention)
    if pytest.importorskip("triton"):
        from kvtool.kernels import decode_attention

        impls.append(decode_attention.paged_decode_attention)
    return impls


@pytest.mark.parametrize("window,cap", CASES)
def test_decode_sees_only_the_window_and_caps_scores(window, cap):
    g = torch.Generator().manual_seed(1)
    lens = [40, 9, 70]
    k_cache, v_cache, tables, keys, values = filled_caches(lens, 2, 64, torch.float32, g)
    query = torch.randn(3, 6, 64, generator=g)
    expected = torch.stack(
        [naive(query[b], keys[b], values[b], 0.125, n - 1, window, cap) for b, n in enumerate(lens)]
    ).float()
    for impl in decode_implementations():
        on = DEVICE if impl.__module__.endswith("decode_attention") else "cpu"
        got = impl(
            query.to(on),
            k_cache.to(on),
            v_cache.to(on),
            tables.to(on),
            torch.tensor(lens, dtype=torch.int32, device=on),
            0.125,
            sliding_window=window,
            logits_soft_cap=cap,
        )
        torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4, msg=impl.__module__)


@pytest.mark.parametrize("window,cap", CASES)
def test_prefill_chunk_on_a_prefix_sees_only_the_window(window, cap):
    g = torch.Generator().manual_seed(2)
    lens, chunks = [50, 30], [20, 30]
    k_cache, v_cache, tables, keys, values = filled_caches(lens, 2, 64, torch.float32, g)
    query = torch.randn(sum(chunks), 4, 64, generator=g)
    expected, row = [], 0
    for b, (n, c) in enumerate(zip(lens, chunks)):
        for i in range(c):
            expected.append(naive(query[row], keys[b], values[b], 0.125, n - c + i, window, cap))
            row += 1
    expected = torch.stack(expected).float()
    args = (tables, torch.tensor([0, 20, 50], dtype=torch.int32), torch.tensor(lens, dtype=torch.int32), 0.125)
    impls = [reference.prefill_attention]
    if pytest.importorskip("triton"):
        from kvtool.kernels import prefill_attention

        impls.append(prefill_attention.prefill_attention)
    for impl in impls:
        on = DEVICE if impl is not reference.prefill_attention else "cpu"
        got = impl(
            query.to(on),
            k_cache.to(on),
            v_cache.to(on),
            *(a.to(on) if torch.is_tensor(a) else a for a in args),
            sliding_window=window,
            logits_soft_cap=cap,
        )
        torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4, msg=impl.__module__)
