"""The same workload through HF transformers `generate`, in static batches: the baseline for `--vs hf`.

Static batching pads each batch to its longest prompt (left) and runs it until its largest
max_tokens; the useful tokens of a row stop at its own max_tokens or end-of-sequence. Every
power-of-two batch size up to the workload size is tried and the best one is reported.
"""

import time
from dataclasses import dataclass

from kvtool.bench.datasets import SampleRequest

MAX_BATCH_SIZE = 64


@dataclass(frozen=True)
class HfRun:
    batch_size: int
    duration_s: float
    input_tokens: int
    output_tokens: int

    @property
    def output_throughput(self) -> float:
        return self.output_tokens / self.duration_s


def batch_sizes(num_requests: int) -> list[int]:
    sizes, size = [], 1
    while size <= min(num_requests, MAX_BATCH_SIZE):
        sizes.append(size)
        size *= 2
    return sizes


def run_hf(model_folder, dtype, samples: list[SampleRequest], ignore_eos: bool) -> list[HfRun]:
    """One HfRun per batch size tried (fastest first)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(model_folder), padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_folder), dtype=dtype).eval()
    with torch.inference_mode():
        runs = [_run_batches(model, tokenizer, samples, size, ignore_eos) for size in batch_sizes(len(samples))]
    return sorted(runs, key=lambda run: -run.output_throughput)


def _run_batches(model, tokenizer, samples: list[SampleRequest], batch_size: int, ignore_eos: bool) -> HfRun:
    start = time.perf_counter()
    input_tokens = output_tokens = 0
    for first in range(0, len(samples), batch_size):
        batch = samples[first : first + batch_size]
        inputs = tokenizer([s.prompt for s in batch], return_tensors="pt", padding=True)
        new_tokens = _generate(model, tokenizer, inputs, max(s.max_tokens for s in batch), ignore_eos)
        input_tokens += int(inputs["attention_mask"].sum())
        output_tokens += sum(
            _useful_tokens(row, s.max_tokens, tokenizer.eos_token_id, ignore_eos) for row, s in zip(new_tokens, batch)
        )
    return HfRun(batch_size, time.perf_counter() - start, input_tokens, output_tokens)


def _generate(model, tokenizer, inputs, max_new_tokens: int, ignore_eos: bool):
    extra = {"min_new_tokens": max_new_tokens} if ignore_eos else {}
    output = model.generate(
        **inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id, **extra
    )
    return output[:, inputs["input_ids"].shape[1] :].tolist()


def _useful_tokens(row: list[int], max_tokens: int, eos_token_id: int, ignore_eos: bool) -> int:
    row = row[:max_tokens]
    if not ignore_eos and eos_token_id in row:
        return row.index(eos_token_id) + 1
    return len(row)
