"""Linear layers at decode batch sizes: plain nn.Linear against oneDNN- and MKL-packed weights (fp32), or
against oneDNN's packed weight and the C kernels small_linear and amx_linear (bf16, AMX tiles where granted).

    .venv/bin/python benchmarks/linear_bench.py                 # SmolLM2-135M's shapes, batch 1..32, fp32
    .venv/bin/python benchmarks/linear_bench.py --dtype bfloat16 --batch-sizes 1,4,8,16,32,64

The three variants run interleaved (one call of each per round) and the median of the rounds is
printed, so that a machine shared with other work slows all three alike. Also prints the largest
difference from nn.Linear, relative to the output's magnitude.
"""

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = {"qkv_proj": (960, 576), "o_proj": (576, 576), "gate_up_proj": (3072, 576), "down_proj": (576, 1536)}
SHAPES["lm_head"] = (49152, 576)


def variants(weight: torch.Tensor, rows: int) -> dict:
    dnn = torch.ops.mkldnn._reorder_linear_weight(weight, 64)
    calls = {
        "plain": lambda x: F.linear(x, weight),
        "onednn": lambda x: torch.ops.mkldnn._linear_pointwise(x, dnn, None, "none", [], ""),
    }
    if weight.dtype == torch.float32:
        mkl = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
        calls["mkl"] = lambda x: torch.ops.mkl._mkl_linear(x, mkl, weight, None, rows)
        return calls
    from kvtool.kernels import cpu_amx, cpu_ops, reference

    calls["small_linear"] = lambda x: cpu_ops.small_linear(x, weight)
    if 0 < rows <= cpu_amx.amx_linear_rows():
        tiles = reference.pack_amx_tiles(weight)
        calls["amx_linear"] = lambda x: cpu_amx.amx_linear(x, tiles, weight.shape[0])
    return calls


def median_us(calls: dict, x: torch.Tensor, rounds: int) -> dict:
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call(x)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.2f}")
    totals = {}
    for rows in (int(b) for b in args.batch_sizes.split(",")):
        for name, (n, k) in SHAPES.items():
            weight = (torch.randn(n, k) / k**0.5).to(getattr(torch, args.dtype))
            x = torch.randn(rows, k).to(weight.dtype)
            calls = variants(weight, rows)
            expected = calls["plain"](x)
            errors = {v: ((c(x) - expected).abs().max() / expected.abs().max()).item() for v, c in calls.items()}
            totals[rows] = list(calls)
            us = median_us(calls, x, args.rounds if n < 10000 else max(args.rounds // 4, 5))
            for v, t in us.items():
                totals[rows, v] = totals.get((rows, v), 0.0) + t
            cells = "  ".join(f"{v} {t:8.1f} us (err {errors[v]:.1e})" for v, t in us.items())
            print(f"M={rows:2d} {name:13s} {cells}", flush=True)
        sums = "  ".join(f"{v} {totals[rows, v] / 1e3:.2f} ms" for v in totals[rows])
        print(f"M={rows:2d} one of each  {sums}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
