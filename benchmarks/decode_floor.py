"""Batch-1 decode against the weight-streaming floor: every step reads every weight once, so a step
cannot take less than weight bytes / memory bandwidth. Both are measured here, in one run.

    .venv/bin/python benchmarks/decode_floor.py                 # SmolLM2-135M, fp32 (and bf16 where supported)
    .venv/bin/python benchmarks/decode_floor.py --steps 32 --rounds 8 --threads 1
    .venv/bin/python benchmarks/decode_floor.py --profile       # and torch.profiler's table of fp32 steps

The bandwidth is the best of a few copy loops over a buffer much larger than the caches (a copy
reads and writes each byte: 2 x bytes per pass). A step only reads, and on some machines a core's read
stream gets less than its share of a copy's traffic, so a second floor divides by a read-only loop's
rate (a dot product of the buffer with itself). The step time is the median of engine steps of one
sequence after its prefill, scheduler included.

The run alternates: rounds of copy and read loops, each followed by decode steps, and each round's
step time is set against its own floors. On a shared machine the memory's pace can move by 1.5x from
one second to the next; a floor measured once, before or after the steps, then reads a swing as
overhead. The ratios printed are the medians of the rounds' ratios, with their range.
"""

import argparse
import os
import statistics
import time

import torch

COPY_BYTES = 512 << 20


def copy_bandwidth(passes: int = 6) -> float:
    """Bytes per second one copy loop moves (read + write), the best of `passes`."""
    src = torch.ones(COPY_BYTES // 4)
    dst = torch.empty_like(src)
    return 2 * COPY_BYTES / best_time(lambda: dst.copy_(src), passes)


def read_bandwidth(passes: int = 6) -> float:
    """Bytes per second a read-only loop (a dot product of a buffer with itself) reads, the best of `passes`."""
    src = torch.ones(COPY_BYTES // 4)
    return COPY_BYTES / best_time(lambda: torch.dot(src, src), passes)


def best_time(run, passes: int) -> float:
    """Seconds of the fastest of `passes` calls of `run`."""
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def weight_bytes(model) -> int:
    """Bytes one decode step reads: every parameter and packed weight, except an untied embedding
    table (a step reads one row of it)."""
    seen, total = set(), 0
    tensors = list(model.named_parameters()) + [(name, t) for name, t in model.named_buffers() if "cos_sin" not in name]
    tensors += [(f"{n}.packed", _decode_copy(m)) for n, m in model.named_modules() if hasattr(m, "packed_weight")]
    tied = getattr(model.lm_head, "weight", None) is model.model.embed_tokens.weight
    for name, tensor in tensors:
        if id(tensor) in seen or (name.endswith("embed_tokens.weight") and not tied):
            continue
        seen.add(id(tensor))
        total += tensor.numel() * tensor.element_size()
    return total


def _decode_copy(packed_linear) -> torch.Tensor:
    """The copy of a PackedLinear's weight a decode step reads: its column panels where it keeps them."""
    return packed_linear.panels if packed_linear.panels is not None else packed_linear.packed_weight


def decode_step_ms(llm, steps: int) -> float:
    from kvtool.engine.runtime.config import SamplingParams

    engine = llm.engine
    engine.add_request(
        "floor", list(range(100, 164)), SamplingParams(max_tokens=steps + 1, ignore_eos=True, temperature=0.0)
    )
    engine.step()  # the prefill
    times = []
    while engine.has_unfinished_requests():
        start = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def profile_steps(llm, steps: int) -> None:
    """torch.profiler's table of `steps` batch-1 decode steps, by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decode_step_ms(llm, steps)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


def measure(model: str, dtype: str, steps: int, rounds: int, threads: int | None, profiled: bool = False) -> None:
    from kvtool.engine.runtime.llm import LLM

    llm = LLM(model, dtype=dtype, max_model_len=1024, kv_cache_memory=64 << 20, threads=threads)
    decode_step_ms(llm, 8)  # warm-up
    nbytes = weight_bytes(llm.engine.model_runner.model)
    rounds_measured = [(copy_bandwidth(3), read_bandwidth(3), decode_step_ms(llm, steps)) for _ in range(rounds)]
    copies, reads, step_times = zip(*rounds_measured)
    bandwidth, read = statistics.median(copies), statistics.median(reads)
    print(
        f"{dtype}: {statistics.median(step_times):.2f} ms/token, floor {nbytes / bandwidth * 1e3:.2f} ms/token "
        f"({nbytes / 1e6:.0f} MB of weights at {bandwidth / 1e9:.1f} GB/s), "
        f"ratio {_spread(nbytes, copies, step_times)}; read-only floor {nbytes / read * 1e3:.2f} ms/token "
        f"({read / 1e9:.1f} GB/s), ratio {_spread(nbytes, reads, step_times)}",
        flush=True,
    )
    if profiled:
        profile_steps(llm, 16)


def _spread(nbytes: int, bandwidths, step_times) -> str:
    """Each round's step time over its own floor (nbytes at that round's bandwidth): median and range."""
    ratios = [step_ms * bandwidth / (nbytes * 1e3) for bandwidth, step_ms in zip(bandwidths, step_times)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} rounds)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--steps", type=int, default=24, help="decode steps a round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of floors then steps")
    parser.add_argument("--threads", type=int, default=None, help="engine threads (default: the CPUs it may use)")
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's table of fp32 decode steps")
    args = parser.parse_args()
    from kvtool.engine.runtime.worker.loader import resolve_model_source
    from kvtool.kernels.cpu_linear import can_pack

    folder = str(resolve_model_source(args.model).folder)
    threads = args.threads or len(os.sched_getaffinity(0))
    omp = {name: os.environ.get(name) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    print(f"{threads} threads, {omp}, load average {_load()}")
    measure(folder, "float32", args.steps, args.rounds, threads, args.profile)
    if can_pack(torch.device("cpu"), torch.bfloat16):
        measure(folder, "bfloat16", args.steps, args.rounds, threads)
    else:
        print("bfloat16: skipped, neither bf16 instructions nor AVX2's column panels here (it would be emulated)")
    print(f"load average {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
