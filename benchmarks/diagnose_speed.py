"""How fast `kvtool diagnose` reads a large log, and how much memory it takes, on four kinds of log.

    python benchmarks/diagnose_speed.py [--megabytes 50] [--kinds busy,dense,storm,long] [--profile KIND]

- busy:  a busy server's log (access lines, request logs, periodic stats), failures planted near the end
- dense: a log where every few lines is an error, wrapped at 80 columns behind Docker/Kubernetes/vLLM
         prefixes (rejected requests, preemption warnings, tracebacks, out-of-memory errors)
- storm: the dense log's layout, but 50 distinct errors repeated (clients retrying the same requests)
- long:  pathological single lines of about 1 MB each (token-id lists, base64, a minified JSON body
         full of anchor words, escaped newlines, a run of one repeated message)

Each log is written to a temporary folder, then read by `diagnose()` in a fresh Python process, which
reports its CPU time (time.process_time, the log's reading only), wall time and the growth of its peak
RSS over what the imports took. Timings depend on the machine and on what else runs on it.
"""

import argparse
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("busy", "dense", "storm", "long")
CHILD = """
import json, resource, sys, time
from kvtool.engine.diagnosis import diagnose
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu, wall = time.process_time(), time.perf_counter()
with open(sys.argv[1], "rb") as stream:
    found = diagnose(stream).findings
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "rss_growth_mib": (after - before) / 1024,
                  "peak_rss_mib": after / 1024, "findings": [f.category for f in found]}))
"""
PREFIXES = (
    "(APIServer pid=1) ERROR 05-01 14:39:06 [core.py:1131] ",
    "vllm-1  | ",
    "[pod/vllm-7d9f/vllm] 2025-05-01T14:39:06.123456Z ",
    "(EngineCore_DP0 pid=7) WARNING 05-01 14:39:06 [scheduler.py:1057] ",
    "> ",
)


def _busy(path: Path, megabytes: int) -> None:
    spec = importlib.util.spec_from_file_location("large_log", ROOT / "tests" / "diagnose" / "large_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_large_log(path, megabytes)


def _wrapped(text: str, prefix: str, width: int = 80) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "".join(prefix + part + "\n" for part in [*lines, line])


def _dense_record(rng: random.Random) -> str:
    limit, asked = rng.choice((4096, 8192, 32768, 131072)), rng.randrange(1000, 200000)
    messages = (
        f"This model's maximum context length is {limit} tokens. However, you requested {asked} tokens "
        f"({asked - 100} in the messages, 100 in the completion). "
        "Please reduce the length of the messages or completion.",
        f"Sequence group {rng.randrange(10**6)} is preempted by PreemptionMode.RECOMPUTE mode because there is not "
        "enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
        f"tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={rng.randrange(10**5)}",
        f"ValueError: The model's max seq len ({limit}) is larger than the maximum number of tokens that can be "
        f"stored in KV cache ({rng.randrange(100, limit)}). Try increasing gpu_memory_utilization or decreasing "
        "max_model_len when initializing the engine.",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {rng.random() * 4:.2f} GiB. GPU 0 has a "
        f"total capacity of 79.19 GiB of which {rng.random():.2f} GiB is free. Including non-PyTorch memory, this "
        "process has 78.00 GiB memory in use.",
    )
    prefix = rng.choice(PREFIXES)
    frames = (
        f'{prefix}  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line {rng.randrange(900)}, '
        "in step\n"
    )
    return frames + _wrapped(rng.choice(messages), prefix)


def _dense(path: Path, megabytes: int, distinct: int | None = None) -> None:
    rng, size, target = random.Random(1), 0, megabytes << 20
    access = 'INFO:     10.0.0.{}:{} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
    with open(path, "w", encoding="utf-8") as log:
        while size < target:
            block = "".join(
                access.format(rng.randrange(256), rng.randrange(60000)) * rng.randrange(1, 4)
                + _dense_record(random.Random(rng.randrange(distinct)) if distinct else rng)
                for _ in range(200)
            )
            size += log.write(block)


def _long(path: Path, megabytes: int) -> None:
    rng, size, target = random.Random(2), 0, megabytes << 20
    makers = (
        lambda: "prompt_token_ids: [" + ", ".join(str(rng.randrange(150000)) for _ in range(160000)) + "]",
        lambda: '{"image_url": "data:image/png;base64,' + "".join(rng.choices("ABCDEFGHabcdefgh0123+/", k=1 << 20)),
        lambda: json.dumps(
            [{"max_tokens": rng.randrange(4096), "model": "m", "memory": "x", "blocks": i} for i in range(20000)]
        ),
        lambda: 'Traceback\\n  File \\"x.py\\", line 1\\n' * 40000,
        lambda: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens. " * 11000,
    )
    with open(path, "w", encoding="utf-8") as log:
        while size < target:
            size += log.write(rng.choice(makers)() + "\n")
        log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")


WRITERS = {"busy": _busy, "dense": _dense, "storm": lambda path, mb: _dense(path, mb, distinct=50), "long": _long}


def measure(kind: str, megabytes: int, folder: Path) -> dict:
    log = folder / f"{kind}.log"
    WRITERS[kind](log, megabytes)
    result = subprocess.run([sys.executable, "-c", CHILD, str(log)], capture_output=True, text=True, check=True)
    return {"kind": kind, "mib": log.stat().st_size / 2**20, **json.loads(result.stdout)}


def profile(kind: str, megabytes: int, folder: Path) -> None:
    import cProfile
    import pstats

    from kvtool.engine.diagnosis import diagnose

    log = folder / f"{kind}.log"
    WRITERS[kind](log, megabytes)
    with cProfile.Profile() as profiler, open(log, "rb") as stream:
        diagnose(stream)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--profile", choices=KINDS, help="print a cProfile of one kind instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.profile:
            return profile(args.profile, args.megabytes, Path(folder))
        for kind in args.kinds.split(","):
            row = measure(kind, args.megabytes, Path(folder))
            print(
                f"{row['kind']:5}  {row['mib']:5.1f} MiB  cpu {row['cpu_s']:5.2f} s  wall {row['wall_s']:5.2f} s  "
                f"peak RSS +{row['rss_growth_mib']:5.1f} MiB ({row['peak_rss_mib']:.0f} MiB)  "
                f"{len(row['findings'])} findings"
            )


if __name__ == "__main__":
    main()
