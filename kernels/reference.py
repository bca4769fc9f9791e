"""Plain-PyTorch versions of every kernel: the CPU inference path and the tests' ground truth.

Shapes and meanings are the contract of `kvtool.kernels`; the Triton kernels take the same arguments.
Caches are [num_blocks, block_size, num_kv_heads, head_dim]; fp8 caches hold x / scale.
"""

import torch
import torch.nn.functional as F

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def store_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=1.0, v_scale=1.0) -> None:
    """Write each token's K and V at its slot (block_id * block_size + offset); slot -1 is skipped."""
    keep = slot_mapping >= 0
    if not bool(keep.all()):
        key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
    _write_slots(k_cache, slot_mapping, _quantize(key, k_cache.dtype, k_scale))
    _write_slots(v_cache, slot_mapping, _quantize(value, v_cache.dtype, v_scale))


def _write_slots(cache, slot_mapping, x):
    cache.view(-1, *cache.shape[2:])[slot_mapping] = x


def _quantize(x, cache_dtype, scale):
    if cache_dtype in FP8_DTYPES:
        x = x.float() / scale
        finfo = torch.finfo(cache_dtype)
        return x.clamp(finfo.min, finfo.max).to(cache_dtype)
    return x.to(cache_dtype)


def _dequantize(x, dtype, scale):
    if x.dtype in FP8_DTYPES:
        return (x.float() * scale).to(dtype)
    return x.to(dtype)


def _gather(cache, block_table, num_tokens, dtype, scale):
    """[num_tokens, Hkv, D] for one sequence, read through its block table."""
    block_size = cache.shape[1]
    num_blocks = (num_tokens + block_size - 1) // block_size
    blocks = cache.index_select(0, block_table[:num_blocks].long()).flatten(0, 1)[:num_tokens]
    return _dequantize(blocks, dtype, scale)


def prefill_attention(
    query,
    k_cache,
    v_cache,
    block_tables,
    cu_seqlens_q,
    context_lens,
    scale,
    k_scale=1.0,
    v_scale=1.0,
    sliding_window=None,
    logits_soft_cap=None,
):
    """Causal attention of each sequence's chunk over its cached prefix plus the chunk itself.

    With `sliding_window` W a query sees only the W keys ending at its own position; with
    `logits_soft_cap` c the scores become c * tanh(score / c) before the softmax (Gemma 2).
    """
    out = torch.empty_like(query)
    starts, lens = cu_seqlens_q.tolist(), context_lens.tolist()
    for b, context_len in enumerate(lens):
        # 4-D inputs: with 3-D ones SDPA falls back to its slow math path on CPU.
        q = query[starts[b] : starts[b + 1]].transpose(0, 1)[None]
        k = _gather(k_cache, block_tables[b], context_len, query.dtype, k_scale).transpose(0, 1)[None]
        v = _gather(v_cache, block_tables[b], context_len, query.dtype, v_scale).transpose(0, 1)[None]
        attended = _causal_attention(q, k, v, scale, sliding_window, logits_soft_cap)
        out[starts[b] : starts[b + 1]] = attended[0].transpose(0, 1)
    return out


def _causal_attention(q, k, v, scale, sliding_window=None, logits_soft_cap=None):
    """q [1, Hq, L, D] over k/v [1, Hkv, S, D]; query i sits at position S - L + i."""
    q_len, context_len = q.shape[2], k.shape[2]
    if q_len == context_len and sliding_window is None and logits_soft_cap is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
    q_pos = torch.arange(context_len - q_len, context_len, device=q.device)
    distance = q_pos[:, None] - torch.arange(context_len, device=q.device)[None, :]
    mask = (distance >= 0) & (distance < (sliding_window or context_len + 1))
    if logits_soft_cap is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    return _soft_capped_attention(q, k, v, mask, scale, logits_soft_cap)


def _soft_capped_attention(q, k, v, mask, scale, cap):
    """Attention with c * tanh(score / c) scores, in fp32 (SDPA has no soft cap)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1).float(), v.repeat_interleave(group, dim=1).float()
    scores = torch.matmul(q.float(), k.transpose(-1, -2)) * scale
    scores = torch.tanh(scores / cap) * cap
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return torch.matmul(probs, v).to(q.dtype)


def paged_decode_attention(
    query,
    k_cache,
    v_cache,
    block_tables,
    context_lens,
    scale,
    k_scale=1.0,
    v_scale=1.0,
    sliding_window=None,
    logits_soft_cap=None,
):
    """One query token per sequence over its context (its last `sliding_window` tokens when set),
    batched with a padding mask."""
    batch, num_heads, head_dim = query.shape
    num_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    max_len = int(context_lens.max())
    num_blocks = (max_len + block_size - 1) // block_size
    table = block_tables[:, :num_blocks].reshape(-1).long()
    # index_select copies whole blocks; advanced indexing is several times slower on CPU.
    k = _dequantize(k_cache.index_select(0, table), query.dtype, k_scale).view(batch, -1, num_kv_heads, head_dim)
    v = _dequantize(v_cache.index_select(0, table), query.dtype, v_scale).view(batch, -1, num_kv_heads, head_dim)
    group = num_heads // num_kv_heads
    q = query.view(batch, num_kv_heads, group, head_dim)
    k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)  # [B, Hkv, S, D]
    positions = torch.arange(k.shape[2], device=query.device)
    lens = context_lens[:, None].to(query.device)
    mask = positions[None, :] < lens
    if sliding_window is not None:
        mask &= positions[None, :] >= lens - sliding_window
    mask = mask[:, None, None, :]
    if logits_soft_cap is None:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    else:
        out = _soft_capped_attention(q, k, v, mask, scale, logits_soft_cap)
    return out.reshape(batch, num_heads, head_dim)


def rms_norm(x, weight, eps, residual=None):
    """RMSNorm in fp32; with a residual, adds it to x first and also returns the sum."""
    if residual is not None:
        x = x + residual
        residual = x
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    out = (normed.to(x.dtype) * weight).to(x.dtype)
    return out if residual is None else (out, residual)


def rotary_embedding(positions, query, key, cos_sin_cache):
    """Rotate query and key (neox / "rotate_half" style) at their positions.

    The arithmetic runs in the activations' dtype, as in HF transformers, so that greedy
    outputs match it token for token.
    """
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    cos = torch.cat((cos, cos), dim=-1)[:, None, :]
    sin = torch.cat((sin, sin), dim=-1)[:, None, :]
    return _rotate(query, cos, sin), _rotate(key, cos, sin)


def _rotate(x, cos, sin):
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def silu_and_mul(x):
    """x [T, 2I] -> silu(x[:, :I]) * x[:, I:]"""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def flush_denormals(num_threads: int) -> None:
    """Subnormal floats read and written as zero on this thread (the team's threads start from it)."""
    torch.set_flush_denormal(True)


def small_linear(x, weight, bias=None):
    """x [T, K] @ weight [N, K]^T + bias, summed in fp32 and rounded to x's dtype once."""
    out = torch.nn.functional.linear(x.float(), weight.float(), None if bias is None else bias.float())
    return out.to(x.dtype)


PANEL_WIDTH = 16  # output columns per panel of a packed weight (PANEL in cpu/panels.h)


def pack_panels(weight):
    """weight [N, K] -> [ceil(N / PANEL_WIDTH), K, PANEL_WIDTH]: panels of output columns, k-major, the
    last one zero-padded; the layout panel_linear reads."""
    n, k = weight.shape
    padded = F.pad(weight, (0, 0, 0, -n % PANEL_WIDTH))
    return padded.view(-1, PANEL_WIDTH, k).transpose(1, 2).contiguous()


def panel_linear(x, panels, n, bias=None):
    """x [T, K] @ W^T + bias for W [n, K] packed by pack_panels, summed in fp32 and rounded to x's dtype once."""
    out = F.linear(x.float(), _unpack_panels(panels, n).float(), None if bias is None else bias.float())
    return out.to(x.dtype)


def fused_moe(x, w13, w2, topk_weights, topk_ids):
    """x [T, H], w13 [E, 2I, H] (gate then up), w2 [E, H, I], topk_weights / topk_ids [T, K]
    -> sum over k of topk_weights[t, k] * down(silu(gate(x_t)) * up(x_t)) of expert topk_ids[t, k].

    The (token, expert) pairs are sorted by expert; each expert runs one matmul over its slice of
    them and an expert that received no token is skipped.
    """
    top_k = topk_ids.shape[1]
    flat = topk_ids.flatten()
    order = flat.argsort(stable=True)
    tokens = order // top_k
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    grouped = x[tokens]
    out = torch.empty_like(grouped)
    start = 0
    for expert, count in enumerate(counts):
        if count:
            rows = slice(start, start + count)
            gate, up = F.linear(grouped[rows], w13[expert]).chunk(2, dim=-1)
            out[rows] = F.linear(F.silu(gate) * up, w2[expert])
            start += count
    out *= topk_weights.flatten()[order, None].to(out.dtype)
    return torch.zeros_like(x).index_add_(0, tokens, out)


QUANT_GROUP = 32  # weights (and activations) share one scale per group of 32 along k


def quant_linear(x, codes, scales, mins, bits):
    """x [T, K] fp32 @ W^T for W [N, K] held as codes per group of 32: w = scale * code + min.

    bits 4: codes [N, K / 2] uint8, byte i of a group holds code i (low nibble) and code i + 16;
    bits 8: codes [N, K] int8. scales and mins (or None) [N, K / 32] fp32. x is quantized per group to
    int8 (scale amax / 127, codes rounded to nearest even) and each group's dot product is exact.
    """
    return _quantized_matmul(x, unpack_codes(codes, bits), scales, mins)


PANEL_LANE = 4  # k-steps of a column side by side in packed codes (LANE in cpu/quant_panel_linear.c)


def pack_quant_panels(codes, scales, mins, bits):
    """quant_linear's codes, scales and mins [N, ...] -> the same weights in panels of PANEL_WIDTH output
    columns (the last one zero-padded): codes [ceil(N / 16), K / 4, 16 * 4 * bits / 8] bytes, where each 4
    k-steps hold every column's 4 codes side by side (bits 4: columns 0-7 in the low nibbles, 8-15 in the
    high ones), scales and mins [ceil(N / 16), K / 32, 16]."""
    panels = pack_panels(unpack_codes(codes, bits))
    lanes = panels.view(len(panels), -1, PANEL_LANE, PANEL_WIDTH).transpose(2, 3)  # [P, K / 4, 16, 4]
    if bits == 4:
        half = PANEL_WIDTH // 2
        lanes = lanes[:, :, :half] | (lanes[:, :, half:] << 4)
    panel_codes = lanes.to(torch.int8 if bits == 8 else torch.uint8).view(torch.uint8).flatten(2)
    return panel_codes.contiguous(), *(None if t is None else pack_panels(t) for t in (scales, mins))


def quant_panel_linear(x, codes, scales, mins, bits, n):
    """quant_linear for W [n, K] packed by pack_quant_panels."""
    lanes = codes.view(torch.int8).to(torch.int16) if bits == 8 else codes.to(torch.int16)
    lanes = lanes.view(len(codes), codes.shape[1], -1, PANEL_LANE)
    if bits == 4:
        lanes = torch.cat((lanes & 0x0F, lanes >> 4), dim=2)
    weight = _unpack_panels(lanes.transpose(2, 3).flatten(1, 2), n)  # [P, K, 16] -> [n, K]
    return _quantized_matmul(x, weight, *(None if t is None else _unpack_panels(t, n) for t in (scales, mins)))


def _unpack_panels(panels, n):
    """[P, K, PANEL_WIDTH] panels -> the [n, K] rows they hold."""
    return panels.transpose(1, 2).flatten(0, 1)[:n]


def _quantized_matmul(x, weight, scales, mins):
    """x [T, K] quantized per group times integer codes [N, K] with scales and mins [N, K / 32]."""
    qx, dx = _quantize_groups(x)
    w = weight.view(len(weight), -1, QUANT_GROUP).double()
    dots = torch.einsum("tgi,ngi->tng", qx.double(), w)  # integers: exact in fp64
    out = (dots * (scales[None] * dx[:, None])).sum(-1)
    if mins is not None:
        out = out + ((dx * qx.sum(-1))[:, None] * mins[None]).sum(-1)
    return out.float()


def dequantize_codes(codes, scales, mins, bits):
    """The fp32 weight [N, K] that codes, scales and mins stand for."""
    w = unpack_codes(codes, bits).view(codes.shape[0], -1, QUANT_GROUP).float() * scales[..., None]
    return (w if mins is None else w + mins[..., None]).flatten(1)


def unpack_codes(codes, bits):
    """[N, K] int16 codes from the packed bytes (see quant_linear)."""
    if bits == 8:
        return codes.view(torch.int8).to(torch.int16)
    groups = codes.view(codes.shape[0], -1, QUANT_GROUP // 2).to(torch.int16)
    return torch.cat((groups & 0x0F, groups >> 4), dim=-1).flatten(1)


def _quantize_groups(x):
    groups = x.float().view(len(x), -1, QUANT_GROUP)
    d = groups.abs().amax(-1) / 127.0
    inv = torch.where(d == 0, torch.zeros_like(d), 1.0 / d)
    return torch.round(groups * inv[..., None]), d
