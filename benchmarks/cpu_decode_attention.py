"""The CPU's paged decode attention alone, against the rate this CPU reads memory at.

    .venv/bin/python benchmarks/cpu_decode_attention.py                    # 32 sequences of 272 tokens, fp32 cache
    .venv/bin/python benchmarks/cpu_decode_attention.py --cache-dtype bfloat16 --threads 1

One call per layer over --layers layers of SmolLM2-135M's heads (9 query, 3 KV, head_dim 64), each layer with
its own K and V caches, so that together they are far larger than the CPU's caches and every call reads
from memory, as a decode step does. Blocks are spread over the cache at random, as a long-running server
leaves them. A pass over all layers is timed (the best of --repeats), and so are a read-only pass over the
same caches (a sum) and a copy of them: the attention's bytes over its time, against those two rates.
"""

import argparse

import torch
from decode_floor import best_time

NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE = 9, 3, 64, 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=272, help="cached tokens of each sequence")
    parser.add_argument("--cache-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from kvtool.kernels import cpu_ops

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    blocks_per_seq = -(-args.context // BLOCK_SIZE)
    num_blocks = args.batch * blocks_per_seq
    dtype = getattr(torch, args.cache_dtype)
    block_tables = torch.randperm(num_blocks).view(args.batch, blocks_per_seq).int()
    context_lens = torch.full((args.batch,), args.context, dtype=torch.int32)
    query = torch.randn(args.batch, NUM_HEADS, HEAD_DIM)
    shape = (num_blocks, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM)
    caches = [(torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)) for _ in range(args.layers)]
    scale = HEAD_DIM**-0.5

    def attention():
        for k_cache, v_cache in caches:
            cpu_ops.paged_decode_attention(query, k_cache, v_cache, block_tables, context_lens, scale)

    flat = [torch.cat([k.flatten(), v.flatten()]) for k, v in caches]
    copies = [torch.empty_like(f) for f in flat]
    read_bytes = 2 * args.batch * args.context * NUM_KV_HEADS * HEAD_DIM * dtype.itemsize * args.layers
    cache_bytes = sum(f.numel() * f.element_size() for f in flat)

    attention()  # the library's first load, outside the timing
    attention_ms = best_time(attention, args.repeats) * 1e3
    read_ms = best_time(lambda: [f.sum() for f in flat], args.repeats) * 1e3
    copy_ms = best_time(lambda: [c.copy_(f) for c, f in zip(copies, flat)], args.repeats) * 1e3
    rate, read_rate = read_bytes / attention_ms / 1e6, cache_bytes / read_ms / 1e6
    print(f"{args.batch} sequences x {args.context} tokens, {args.cache_dtype} cache, {args.threads} threads")
    print(f"attention: {attention_ms:.1f} ms for {read_bytes / 1e6:.0f} MB of K and V = {rate:.1f} GB/s")
    print(f"read-only pass: {read_rate:.1f} GB/s; attention at {rate / read_rate:.2f}x")
    print(f"copy: {2 * cache_bytes / copy_ms / 1e6:.1f} GB/s (read and write)")


if __name__ == "__main__":
    main()
