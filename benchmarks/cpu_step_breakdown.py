"""Where a CPU decode step's time goes, against the step's floor, at a few batch sizes.

    .venv/bin/python benchmarks/cpu_step_breakdown.py                       # SmolLM2, batch 1, 8, 32, fp32 and bf16
    .venv/bin/python benchmarks/cpu_step_breakdown.py --batches 32 --dtypes bfloat16 --rounds 6
    .venv/bin/python benchmarks/cpu_step_breakdown.py --quantization gguf --dtypes float32   # the Q4_1 codes kept

Each batch holds B requests of --input-len prompt tokens that decode together. A round times --steps
engine steps untimed (the step time), then as many with a timer around each part (the breakdown): the
linear layers (GEMMs, the output layer included), attention (the KV write and decode attention), the
other kernels (norms, rotary, SiLU-and-mul), the one-call C decode step where it takes the step
(docs/engine.md), sampling, scheduling and block management (the scheduler, its update, the input
batch), the output processor, and Python: the step less all of those. A timer costs about a
microsecond a call, a few hundred calls a step; the untimed step time is the one set against the floor.

Where the one-call decode step takes the batch, its kernels cannot be timed apart; the same round then
also times the layers run from Python (the same kernels on the same buffers) for their shares.

The floor of a step is the larger of its bytes (every weight, plus the K and V each sequence reads)
over the memory bandwidth of a copy loop (benchmarks/decode_floor.py), and its FLOPs (2 per weight per
row, plus attention's 4 per head dimension per cached token) over the peak of a large matmul in the
step's dtype (oneDNN's AMX tiles for bf16 where the CPU has them). Each round measures both floors just
before its steps, and the ratios are the medians of the rounds' ratios.
"""

import argparse
import contextlib
import statistics
import time

import torch
from decode_floor import copy_bandwidth, weight_bytes
from step_timers import PARTS, PhaseTimers, wrap_classes, wrap_engine

PEAK_SIZE = 2048


def matmul_peak(dtype: torch.dtype, passes: int = 3) -> float:
    """FLOP/s of a PEAK_SIZE-cubed matmul in `dtype`, the best of `passes`."""
    a = torch.randn(PEAK_SIZE, PEAK_SIZE).to(dtype)
    b = torch.randn(PEAK_SIZE, PEAK_SIZE).to(dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * PEAK_SIZE**3 / best


@contextlib.contextmanager
def amx_refusal(refused: bool):
    """While it lasts, kvtool's AMX kernel is refused the tile state (as a kernel that filters arch_prctl
    would): the linear layers keep the kernels they had before it (oneDNN still takes AMX itself)."""
    from kvtool.kernels import cpu_amx

    original = cpu_amx.request_amx_permission
    if refused:
        cpu_amx.request_amx_permission = lambda: 1
        cpu_amx.amx_permitted.cache_clear()
    try:
        yield
    finally:
        cpu_amx.request_amx_permission = original
        cpu_amx.amx_permitted.cache_clear()


def start_batch(engine, batch: int, input_len: int, max_tokens: int) -> None:
    """`batch` requests of `input_len` tokens, run until every one is decoding."""
    from kvtool.engine.runtime.config import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request(f"r{i}", [100 + (i * 7 + j) % 20000 for j in range(input_len)], params)
    while any(seq.num_output_tokens == 0 for seq in engine.scheduler.running + list(engine.scheduler.waiting)):
        engine.step()


def timed_steps(engine, steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - start)
    return times


def step_floor(engine, batch: int, nbytes_weights: int, bandwidth: float, peak: float) -> tuple[float, float]:
    """(memory floor, compute floor) in seconds of the coming decode step of a Llama-family model."""
    runner, cfg = engine.model_runner, engine.model_runner.model.config
    contexts = sum(seq.num_computed_tokens + 1 for seq in engine.scheduler.running)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    q, kv = cfg.num_attention_heads * head_dim, cfg.num_key_value_heads * head_dim
    kv_bytes = contexts * cfg.num_hidden_layers * 2 * kv * runner.kv_cache.element_size()
    per_layer = cfg.hidden_size * (2 * q + 2 * kv) + 3 * cfg.hidden_size * cfg.intermediate_size
    linear_params = cfg.num_hidden_layers * per_layer + cfg.vocab_size * cfg.hidden_size
    attn_flops = 4 * contexts * cfg.num_hidden_layers * q
    return (nbytes_weights + kv_bytes) / bandwidth, (2 * linear_params * batch + attn_flops) / peak


def round_of(engine, timers: PhaseTimers, batch: int, steps: int, nbytes: int, peak: float) -> dict:
    """One round: the floors, untimed steps, steps with timers, and where the one-call C step takes the
    batch, the layers from Python with timers. Seconds per step, by name."""
    model = engine.model_runner.model.model
    result = dict(zip(("memory floor", "compute floor"), step_floor(engine, batch, nbytes, copy_bandwidth(3), peak)))
    result["step"] = statistics.median(timed_steps(engine, steps))
    result.update(_timed_parts(engine, timers, steps, ""))
    fused = model.fused_decode
    if fused is not None and batch <= fused.max_rows:
        model.fused_decode = None
        result.update(_timed_parts(engine, timers, steps, "layers: "))
        model.fused_decode = fused
    return result


def _timed_parts(engine, timers: PhaseTimers, steps: int, prefix: str) -> dict:
    timers.seconds.clear()
    timers.on = True
    total = sum(timed_steps(engine, steps))
    timers.on = False
    parts = {name: timers.seconds.get(name, 0.0) / steps for name in PARTS[:-1]}
    parts["Python"] = total / steps - sum(parts.values())
    parts["timed step"] = total / steps
    return {prefix + name: value for name, value in parts.items()}


def start_engine(model: str, dtype: str, batch: int, args, refused: bool):
    """An engine with `batch` requests decoding, warmed up."""
    from kvtool.engine.runtime.llm import LLM

    with amx_refusal(refused):
        llm = LLM(
            model,
            dtype=dtype,
            quantization=args.quantization,
            max_model_len=args.input_len + 512,
            max_num_seqs=batch,
            threads=args.threads,
        )
    start_batch(llm.engine, batch, args.input_len, (3 * args.rounds + 1) * args.steps * 3)
    timed_steps(llm.engine, args.steps)
    return llm.engine


def measure(model: str, dtype: str, batch: int, args) -> dict:
    """Per variant (the engine as it starts, and with --baseline where it applies, one refused AMX tiles), the
    medians over rounds of each figure and of each round's step over its floor; rounds alternate variants."""
    on_tiles = dtype == "bfloat16" or args.quantization == "gguf"  # bf16 weights, or codes in int8
    variants = {"": False} | ({"AMX refused": True} if args.baseline and on_tiles else {})
    timers = PhaseTimers()
    wrap_classes(timers)
    engines = {label: start_engine(model, dtype, batch, args, refused) for label, refused in variants.items()}
    for engine in engines.values():
        wrap_engine(timers, engine)
    nbytes, peak = weight_bytes(engines[""].model_runner.model), matmul_peak(getattr(torch, dtype))
    rounds = {label: [] for label in engines}
    for _ in range(args.rounds):
        for label, engine in engines.items():
            rounds[label].append(round_of(engine, timers, batch, args.steps, nbytes, peak))
    timers.restore()
    results = {label: _summary(rs) for label, rs in rounds.items()}
    for label in results:
        results[label]["over first"] = statistics.median(
            r["step"] / f["step"] for r, f in zip(rounds[label], rounds[""])
        )
    results[""]["peak GFLOP/s"] = peak / 1e9
    return results


def _summary(rounds: list[dict]) -> dict:
    result = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    result["floor ratio"] = statistics.median(r["step"] / max(r["memory floor"], r["compute floor"]) for r in rounds)
    return result


def render(dtype: str, batch: int, results: dict) -> list[str]:
    """Markdown rows per variant: ms per step (and over the first variant's, paired by round), the floors and
    the ratio, then each part in ms and its share of the timed step; a row for the layers from Python where
    the one-call C step took the batch."""
    rows = []
    for label, result in results.items():
        name = f"{dtype}, {label}" if label else dtype
        head = (
            f"| {name} | {batch} | {result['step'] * 1e3:.1f} ({result['over first']:.2f}x) | "
            f"{result['memory floor'] * 1e3:.1f} | {result['compute floor'] * 1e3:.1f} | {result['floor ratio']:.2f}x |"
        )
        rows.append(head + _shares(result, ""))
        if "layers: timed step" in result:
            rows.append(f"| {name} | {batch}, layers from Python | | | | |" + _shares(result, "layers: "))
    return rows


def _shares(result: dict, prefix: str) -> str:
    total = result[prefix + "timed step"]
    cells = (result[prefix + part] for part in PARTS)
    return "".join(f" {ms * 1e3:.1f} ({ms / total:.0%}) |" if ms > 0 else " – |" for ms in cells)


HEADER = (
    "| dtype | batch | step ms (over the first row's) | memory floor ms | compute floor ms | step / floor | "
    + " | ".join(PARTS)
    + " |\n|"
    + "---|" * 2
    + "---:|" * (4 + len(PARTS))
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--batches", default="1,8,32", help="comma-separated batch sizes")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated dtypes")
    parser.add_argument("--input-len", type=int, default=256, help="prompt tokens of each request")
    parser.add_argument("--steps", type=int, default=8, help="decode steps per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of floors, steps and timed steps")
    parser.add_argument("--threads", type=int, default=None, help="engine threads (default: the CPUs it may use)")
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="bf16 or GGUF codes: also an engine refused AMX tiles, rounds alternating",
    )
    parser.add_argument("--quantization", choices=["gguf"], help="keep a GGUF's codes quantized (smollm2: its Q4_1)")
    args = parser.parse_args()
    from kvtool.engine.runtime.worker.loader import resolve_model_source, smollm2_gguf

    gguf = args.quantization and args.model == "smollm2"
    folder = str(smollm2_gguf() if gguf else resolve_model_source(args.model).folder)
    print(f"threads {args.threads or torch.get_num_threads()}, input {args.input_len} tokens, {args.rounds} rounds")
    print(HEADER, flush=True)
    for dtype in args.dtypes.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            print("\n".join(render(dtype, batch, measure(folder, dtype, batch, args))), flush=True)


if __name__ == "__main__":
    main()
