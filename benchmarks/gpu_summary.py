"""Print the GPU check's results against the targets: python benchmarks/gpu_summary.py RESULTS_DIR"""

import json
import sys
from pathlib import Path


def load(folder: Path, name: str) -> dict | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def main(folder: Path) -> None:
    equality, hf, kernels = load(folder, "equality"), load(folder, "hf"), load(folder, "kernels")
    for r in kernels or []:
        rate = f"{r['kv_read_GBps']:,.0f} GB/s of KV" if "kv_read_GBps" in r else f"{r['TFLOPs']:.0f} TFLOP/s"
        print(
            f"{r['op']} {r.get('cache_dtype', '')} batch {r['batch']}: {r['triton_ms']:.3f} ms, {rate}, "
            f"{r['speedup']:.1f}x the torch reference"
        )
    if equality:
        for dtype, r in equality.items():
            if isinstance(r, dict) and "equal" in r:
                print(
                    f"greedy equality vs HF ({dtype}): {r['equal']}  matching prefix {r['matching_prefix_tokens']}"
                    f" of {r['new_tokens']}"
                )
    hf_rate = hf["output_tokens_per_s"] if hf else None
    if hf_rate:
        print(f"HF generate: {hf_rate:,.0f} output tok/s (batch {hf['batch_size']})")
    for kv in ("auto", "fp8"):
        speed = load(folder, f"speed-{kv}")
        if not speed:
            continue
        d, t = speed["decode"], speed["throughput"]
        print(
            f"[kv {kv}] batch-1 step {d['step_ms']:.2f} ms, floor {d['floor_ms']:.2f} ms, "
            f"ratio {d['ratio_to_floor']:.2f} (target <= 1.25)"
        )
        ratio = f", {t['output_tokens_per_s'] / hf_rate:.1f}x HF (target >= 10x)" if hf_rate else ""
        print(
            f"[kv {kv}] {t['requests']} x ({t['input_len']} in, {t['output_len']} out): "
            f"{t['output_tokens_per_s']:,.0f} output tok/s{ratio}; KV cache {speed['kv_cache_tokens']:,} tokens"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
