"""Attention kernels alone, Triton vs the torch reference: time, bandwidth (decode), TFLOP/s (prefill).

    python benchmarks/kernel_bench.py --out DIR            # on a GPU; writes DIR/kernels.json
    TRITON_INTERPRET=1 python benchmarks/kernel_bench.py --smoke --out DIR   # tiny shapes on a CPU

Shapes are Llama-3.1-8B's attention (32 query heads, 8 KV heads, head_dim 128, block_size 16).
"""

import argparse
import json
import time
from pathlib import Path

import torch

NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE = 32, 8, 128, 16


def bench_ms(fn) -> float:
    if torch.cuda.is_available():
        import triton.testing

        return triton.testing.do_bench(fn, warmup=10, rep=50)
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def paged_caches(batch: int, context_len: int, cache_dtype, device):
    blocks_per_seq = -(-context_len // BLOCK_SIZE)
    shape = (batch * blocks_per_seq, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM)
    k_cache = torch.randn(shape, device=device).to(cache_dtype)
    v_cache = torch.randn(shape, device=device).to(cache_dtype)
    tables = torch.randperm(batch * blocks_per_seq, device=device).to(torch.int32).view(batch, blocks_per_seq)
    return k_cache, v_cache, tables


def decode_case(batch: int, context_len: int, cache_dtype, device) -> dict:
    from kvtool.kernels import decode_attention, reference

    k_cache, v_cache, tables = paged_caches(batch, context_len, cache_dtype, device)
    query = torch.randn(batch, NUM_HEADS, HEAD_DIM, device=device, dtype=torch.bfloat16)
    lens = torch.full((batch,), context_len, dtype=torch.int32, device=device)
    args = (query, k_cache, v_cache, tables, lens, HEAD_DIM**-0.5)
    kv_bytes = 2 * batch * context_len * NUM_KV_HEADS * HEAD_DIM * k_cache.element_size()
    triton_ms = bench_ms(lambda: decode_attention.paged_decode_attention(*args))
    torch_ms = bench_ms(lambda: reference.paged_decode_attention(*args))
    return {
        "op": "paged_decode_attention",
        "batch": batch,
        "context_len": context_len,
        "cache_dtype": str(cache_dtype).removeprefix("torch."),
        "triton_ms": triton_ms,
        "torch_ms": torch_ms,
        "kv_read_GBps": kv_bytes / triton_ms / 1e6,
        "speedup": torch_ms / triton_ms,
    }


def prefill_case(batch: int, seq_len: int, device) -> dict:
    from kvtool.kernels import prefill_attention, reference

    k_cache, v_cache, tables = paged_caches(batch, seq_len, torch.bfloat16, device)
    query = torch.randn(batch * seq_len, NUM_HEADS, HEAD_DIM, device=device, dtype=torch.bfloat16)
    cu_seqlens = torch.arange(0, batch * seq_len + 1, seq_len, dtype=torch.int32, device=device)
    lens = torch.full((batch,), seq_len, dtype=torch.int32, device=device)
    args = (query, k_cache, v_cache, tables, cu_seqlens, lens, HEAD_DIM**-0.5)
    flops = 2 * 2 * batch * NUM_HEADS * HEAD_DIM * seq_len * seq_len / 2  # causal: half the products
    triton_ms = bench_ms(lambda: prefill_attention.prefill_attention(*args))
    torch_ms = bench_ms(lambda: reference.prefill_attention(*args))
    return {
        "op": "prefill_attention",
        "batch": batch,
        "seq_len": seq_len,
        "triton_ms": triton_ms,
        "torch_ms": torch_ms,
        "TFLOPs": flops / triton_ms / 1e9,
        "speedup": torch_ms / triton_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=".")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, to check the script on a CPU")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    scale = 16 if args.smoke else 1
    results = [
        decode_case(64 // scale, 2048 // scale, dtype, device) for dtype in (torch.bfloat16, torch.float8_e4m3fn)
    ]
    results.append(decode_case(1, 32768 // scale**2, torch.bfloat16, device))  # split-K
    results.append(prefill_case(4 // (4 if args.smoke else 1), 2048 // scale, device))
    Path(args.out, "kernels.json").write_text(json.dumps(results, indent=2))
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
