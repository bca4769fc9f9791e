"""A large, realistic vLLM server log for the streaming test and the timing measurement.

    .venv/bin/python tests/diagnose/large_log.py [MEGABYTES]   # writes one, times `kvtool diagnose` on it

Most lines are the ones a busy server repeats (access lines, request logs with SamplingParams,
periodic stats); three failures are planted: a request rejected as too long, a full KV cache with
preemptions, and a run-time CUDA OOM at the end.
"""

import random
import sys
from pathlib import Path

START = """\
INFO 11-29 08:00:00 [api_server.py:1] vLLM API server version 0.11.0
INFO 11-29 08:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_model_len': 32768}
INFO 11-29 08:00:20 [gpu_worker.py:298] Available KV cache memory: 52.10 GiB
INFO 11-29 08:00:20 [kv_cache_utils.py:1087] GPU KV cache size: 975,600 tokens
INFO:     Application startup complete.
"""
TOO_LONG = (
    '{"error":{"message":"This model\'s maximum context length is 32768 tokens. However, your request has '
    '40100 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}\n'
)
FULL = (
    "INFO 11-29 09:00:00 [loggers.py:127] Engine 000: Avg prompt throughput: 9000.0 tokens/s, Avg generation "
    "throughput: 800.0 tokens/s, Running: 200 reqs, Waiting: 57 reqs, GPU KV cache usage: 99.6%, Prefix cache hit rate: 4.0%\n"
)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.10 GiB is free. Of the allocated memory 75.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved "
    "by PyTorch but unallocated.\n"
)
PLANTED_CATEGORIES = ["request_too_long", "preemption", "cuda_oom_runtime"]


def _busy_lines(rng: random.Random) -> list[str]:
    rid = rng.randrange(10**8)
    return [
        f'INFO:     10.0.{rng.randrange(256)}.{rng.randrange(256)}:{rng.randrange(60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
        f"INFO 11-29 08:10:00 [logger.py:41] Received request chatcmpl-{rid}: prompt: '<|im_start|>user\\nHello "
        f"number {rid}<|im_end|>', params: SamplingParams(n=1, temperature=0.7, top_p=0.8, top_k=20, "
        f"max_tokens={rng.choice((256, 512, 1024))}, min_tokens=0), prompt_token_ids: None, lora_request: None.\n",
        f"INFO 11-29 08:10:00 [engine.py:331] Added request chatcmpl-{rid}.\n",
        f"DEBUG 11-29 08:10:00 [core.py:512] EngineCore loop step {rid} scheduled {rng.randrange(64)} sequences\n",
        f"INFO 11-29 08:10:01 [loggers.py:127] Engine 000: Avg prompt throughput: {rng.random() * 5000:.1f} tokens/s, "
        f"Avg generation throughput: {rng.random() * 900:.1f} tokens/s, Running: {rng.randrange(64)} reqs, Waiting: 0 reqs, "
        f"GPU KV cache usage: {rng.random() * 60:.1f}%, Prefix cache hit rate: {rng.random() * 50:.1f}%\n",
    ]


def write_large_log(path: Path, megabytes: int = 50, seed: int = 0) -> Path:
    rng, size, target = random.Random(seed), 0, megabytes << 20
    with open(path, "w", encoding="utf-8") as log:
        log.write(START)
        while size < target:
            block = "".join(line for _ in range(200) for line in _busy_lines(rng))
            if rng.random() < 0.01:
                block += rng.choice((TOO_LONG, FULL))
            size += log.write(block)
        log.write(TOO_LONG + FULL + OOM)
    return path


def measure(megabytes: int) -> None:
    import json
    import resource
    import subprocess
    import tempfile
    import time

    with tempfile.TemporaryDirectory() as folder:
        log = write_large_log(Path(folder) / "server.log", megabytes)
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "kvtool", "diagnose", "--json", str(log)], capture_output=True, text=True
        )
        elapsed = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        categories = [finding["category"] for finding in json.loads(result.stdout)["findings"]]
        print(
            f"{log.stat().st_size / 2**20:.1f} MiB in {elapsed:.2f} s (whole process, incl. start-up), "
            f"peak RSS {peak_kib / 1024:.1f} MiB, exit {result.returncode}, findings {categories}"
        )


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
