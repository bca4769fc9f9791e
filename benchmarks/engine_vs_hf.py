"""Output-token throughput of the embedded engine against HF transformers `generate`, same requests.

    .venv/bin/python benchmarks/engine_vs_hf.py                      # 64 requests, SmolLM2, bf16
    .venv/bin/python benchmarks/engine_vs_hf.py --hf-batch-sizes 8,16 --num-requests 32
    .venv/bin/python benchmarks/engine_vs_hf.py --num-requests 32 --skip-hf --by-step-kind   # where the run goes

Requests have random prompts (token ids) of 32-512 tokens and ask for 32-256 output tokens with
ignore_eos. HF runs them in static batches (left padding, every batch generating to its longest
request, only requested tokens counted) at each batch size given; the best one is the baseline.

--by-step-kind times the engine's run by kind of step (prompt chunks only, chunks beside decodes, decodes
only) and, within each, the parts benchmarks/step_timers.py times (a microsecond a call, so the run is a
little slower than without): the linear layers, attention, the other kernels, the one-call C decode
step, sampling, scheduling, outputs, and Python (the rest of the step).
"""

import argparse
import random
import time

import torch


def make_requests(num: int, vocab: int, input_range, output_range, seed: int):
    rng = random.Random(seed)
    return [
        ([rng.randrange(100, vocab) for _ in range(rng.randint(*input_range))], rng.randint(*output_range))
        for _ in range(num)
    ]


def run_engine(model: str, dtype: str, requests, max_num_seqs: int, by_step_kind: bool = False):
    """(seconds, output tokens, per kind of step its totals or None)."""
    from kvtool.engine.runtime.config import SamplingParams
    from kvtool.engine.runtime.llm import LLM

    llm = LLM(model, dtype=dtype, max_num_seqs=max_num_seqs, max_model_len=2048)
    llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)  # warm-up
    kinds = _step_kind_timers(llm.engine) if by_step_kind else None
    params = [SamplingParams(max_tokens=out, temperature=0.0, ignore_eos=True) for _, out in requests]
    start = time.perf_counter()
    outputs = llm.generate([prompt for prompt, _ in requests], params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    return elapsed, sum(len(o.outputs[0].token_ids) for o in outputs), kinds and kinds.totals


def _step_kind_timers(engine):
    from step_timers import PhaseTimers, StepKindTimers, wrap_classes, wrap_engine

    timers = PhaseTimers()
    wrap_classes(timers)
    wrap_engine(timers, engine)
    timers.on = True
    return StepKindTimers(timers, engine)


def render_step_kinds(totals: dict, elapsed: float) -> str:
    """A markdown table: per kind of step, its steps, tokens, seconds (share of the run), ms a step, mean
    threads, and each part's seconds (share of the kind's seconds)."""
    from step_timers import PARTS

    lines = [
        "| step kind | steps | prompt tokens | decode rows | s (share of run) | ms/step | threads | "
        + " | ".join(PARTS)
        + " |",
        "|---|" + "---:|" * (6 + len(PARTS)),
    ]
    for kind, t in totals.items():
        if not t["steps"]:
            continue
        t["Python"] = t["seconds"] - sum(t[part] for part in PARTS[:-1])
        head = (
            f"| {kind} | {t['steps']:.0f} | {t['prefill tokens']:.0f} | {t['decode rows']:.0f} | "
            f"{t['seconds']:.2f} ({t['seconds'] / elapsed:.0%}) | {t['seconds'] / t['steps'] * 1e3:.1f} | "
            f"{t['thread-steps'] / t['steps']:.2f} |"
        )
        lines.append(head + "".join(f" {t[p]:.2f} ({t[p] / t['seconds']:.0%}) |" for p in PARTS))
    return "\n".join(lines)


def run_hf(folder: str, dtype: str, requests, batch_size: int) -> tuple[float, int]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    start, tokens = time.perf_counter(), 0
    for i in range(0, len(requests), batch_size):
        batch = requests[i : i + batch_size]
        tokens += _hf_batch(model, batch)
    return time.perf_counter() - start, tokens


def _hf_batch(model, batch) -> int:
    width = max(len(p) for p, _ in batch)
    ids = torch.tensor([[0] * (width - len(p)) + p for p, _ in batch])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in batch])
    longest = max(out for _, out in batch)
    with torch.inference_mode():
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=longest,
            min_new_tokens=longest,
            do_sample=False,
            pad_token_id=0,
        )
    return sum(out for _, out in batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--input-len", default="32,512", help="min,max prompt tokens")
    parser.add_argument("--output-len", default="32,256", help="min,max output tokens")
    parser.add_argument("--hf-batch-sizes", default="8,16,32")
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--by-step-kind", action="store_true", help="time the engine's run by kind of step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both (default: torch's)")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)

    from kvtool.engine.runtime.worker.loader import resolve_model_source

    folder = str(resolve_model_source(args.model).folder)
    requests = make_requests(
        args.num_requests,
        49152 if args.model == "smollm2" else 32000,
        _pair(args.input_len),
        _pair(args.output_len),
        args.seed,
    )
    print(
        f"{len(requests)} requests, {sum(len(p) for p, _ in requests)} prompt tokens, "
        f"{sum(o for _, o in requests)} output tokens, {args.dtype}, {torch.get_num_threads()} threads"
    )

    elapsed, tokens, kinds = run_engine(folder, args.dtype, requests, args.max_num_seqs, args.by_step_kind)
    engine_tps = tokens / elapsed
    print(f"engine: {tokens} tokens in {elapsed:.1f} s = {engine_tps:.1f} output tok/s")
    if kinds:
        print(render_step_kinds(kinds, elapsed))
    if args.skip_hf:
        return
    best = 0.0
    for batch_size in (int(b) for b in args.hf_batch_sizes.split(",")):
        elapsed, tokens = run_hf(folder, args.dtype, requests, batch_size)
        print(
            f"HF generate, batch {batch_size}: {tokens} tokens in {elapsed:.1f} s = {tokens / elapsed:.1f} output tok/s"
        )
        best = max(best, tokens / elapsed)
    print(f"engine / best HF = {engine_tps / best:.2f}x")


def _pair(text: str) -> tuple[int, int]:
    low, high = (int(x) for x in text.split(","))
    return low, high


if __name__ == "__main__":
    main()
