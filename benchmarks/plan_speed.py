"""How long `kvtool plan --json` takes from a fresh process: a catalog model, and a Hub model answered from the
cache (first fetched once through a Hub stand-in on 127.0.0.1, then read with the stand-in still up and with
HF_HUB_OFFLINE=1).

    python benchmarks/plan_speed.py [--runs 10]

Each row is the median over `--runs` fresh processes of wall and CPU time (user + system, from
os.wait4), next to the same for `python -c pass`, measured in the same run. Timings depend on the machine and
on what else runs on it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "plan"))
from hub_stand_in import HubStandIn, safetensors_file  # noqa: E402

KVTOOL = [str(Path(sys.executable).parent / "kvtool")]  # the console script users run
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `command`, which must succeed."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def row(name: str, command: list[str], env: dict, runs: int) -> None:
    samples = [timed(command, env) for _ in range(runs)]
    wall = statistics.median(s[0] for s in samples)
    cpu = statistics.median(s[1] for s in samples)
    print(f"{name:34}  wall {wall:5.3f} s  cpu {cpu:5.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    tensors = {"model.embed_tokens.weight": ("BF16", [128256, 4096]), "lm_head.weight": ("BF16", [128256, 4096])}
    hub = HubStandIn(
        {
            "some-org/some-model": {
                "config.json": json.dumps(CONFIG).encode(),
                "model.safetensors": safetensors_file(tensors),
            }
        }
    )
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": f"{folder}/hf", "KVTOOL_CACHE_DIR": f"{folder}/kv"}
        env.pop("HF_HUB_OFFLINE", None)
        hub_plan = [*KVTOOL, "plan", "--model", "some-org/some-model", "--gpu", "H100", "--json"]
        timed(hub_plan, env)  # fills the caches
        row("python -c pass", [sys.executable, "-c", "pass"], env, runs)
        row(
            "catalog model (llama3.1-8b)",
            [*KVTOOL, "plan", "--model", "llama3.1-8b", "--gpu", "H100", "--json"],
            env,
            runs,
        )
        row("Hub model from the cache", hub_plan, env, runs)
        hub.close()
        row("Hub model, HF_HUB_OFFLINE=1", hub_plan, {**env, "HF_HUB_OFFLINE": "1"}, runs)


if __name__ == "__main__":
    main()
