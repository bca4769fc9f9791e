"""GGUF-style Q4_1 codes at decode batch sizes: quant_panel_linear.c against the same panels on AMX-INT8 tiles
(quant_amx_linear.c, where the kernel grants them), SmolLM2-135M's shapes, interleaved as linear_bench.

    taskset -c 0 .venv/bin/python benchmarks/quant_linear_bench.py --threads 1 --batch-sizes 1,4,8,16,32,64,128
"""

import argparse
import functools
import os

import torch
from linear_bench import SHAPES, median_us

from kvtool.kernels import cpu_amx, cpu_ops, reference
from kvtool.kernels.quant_linear import pack_codes


def q4_1_weight(n: int, k: int) -> tuple:
    codes = pack_codes(torch.randint(0, 16, (n, k)), 4)
    return *reference.pack_quant_panels(codes, torch.rand(n, k // 32) * 0.02, -torch.rand(n, k // 32) * 0.1, 4), 4, n


def every_layer(kernel, weights: dict, xs: dict) -> list:
    return [kernel(xs[name], *weight) for name, weight in weights.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="1,4,8,16,32,64")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} threads, tiles granted: {cpu_amx.quant_tiles_granted()}, load {os.getloadavg()[0]:.2f}")
    weights = {name: q4_1_weight(n, k) for name, (n, k) in SHAPES.items() if name != "lm_head"}
    kernels = {"quant_panel_linear": cpu_ops.quant_panel_linear, "quant_amx_linear": cpu_amx.quant_amx_linear}
    calls = {v: functools.partial(every_layer, f, weights) for v, f in kernels.items()}
    macs = sum(n * k for name, (n, k) in SHAPES.items() if name in weights)
    for rows in (int(b) for b in args.batch_sizes.split(",")):
        xs = {name: torch.randn(rows, SHAPES[name][1]) for name in weights}
        us = median_us(calls, xs, args.rounds)
        cells = "  ".join(f"{v} {t:8.1f} us ({rows * macs / t / 1e3:5.1f} G MAC/s)" for v, t in us.items())
        ratio = us["quant_panel_linear"] / us["quant_amx_linear"]
        print(f"M={rows:3d} one layer's four  {cells}  panels / tiles {ratio:.2f}x")


if __name__ == "__main__":
    main()
