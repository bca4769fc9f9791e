"""Engine throughput alone and beside one busy process, for three OpenMP wait policies back to back:
libgomp's default (a thread that reaches a barrier spins for up to 300,000 rounds before it sleeps),
passive (it sleeps at once) and the short spin `kvtool serve` sets (GOMP_SPINCOUNT, see
kvtool.engine.sizing.defaults.CPU_OMP_ENVIRONMENT).

    .venv/bin/python benchmarks/contention.py                    # fp32 SmolLM2, 8 requests x 32 tokens

Each case runs in a fresh process (the wait policy is read when torch loads OpenMP). The busy
process is one Python loop. With 2 cores and one competitor the fair share is 2/3 of a core pair.
"""

import argparse
import os
import subprocess
import sys
import time

from kvtool.engine.sizing.defaults import CPU_OMP_ENVIRONMENT

OMP_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
POLICIES = {"spin (OpenMP default)": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "kvtool serve": CPU_OMP_ENVIRONMENT}


def worker(num_requests: int, output_len: int, threads: int | None, dtype: str) -> None:
    from kvtool.engine.runtime.config import SamplingParams
    from kvtool.engine.runtime.llm import LLM

    llm = LLM("smollm2", dtype=dtype, max_model_len=1024, kv_cache_memory=64 << 20, threads=threads)
    llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)
    prompts = [list(range(100 + i, 164 + i)) for i in range(num_requests)]
    params = SamplingParams(max_tokens=output_len, ignore_eos=True, temperature=0.0)
    start = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    print(num_requests * output_len / (time.perf_counter() - start))


def run_case(policy: dict, busy: bool, args) -> float:
    env = {**{k: v for k, v in os.environ.items() if k not in OMP_VARIABLES}, **policy}
    competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        argv = [sys.executable, __file__, "--worker", "-n", str(args.n), "--output-len", str(args.output_len)]
        argv += ["--dtype", args.dtype]
        argv += ["--threads", str(args.threads)] if args.threads else []
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    finally:
        if competitor:
            competitor.kill()
            competitor.wait()
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=8, help="concurrent requests")
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.n, args.output_len, args.threads, args.dtype)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, policy in POLICIES.items():
        alone = run_case(policy, False, args)
        beside = run_case(policy, True, args)
        print(f"{name}: alone {alone:.1f} tok/s, beside one busy process {beside:.1f} tok/s ({beside / alone:.2f}x)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
