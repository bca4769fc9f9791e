"""GPU checks of the engine against HF transformers, each writing one JSON result.

    python benchmarks/gpu_bench.py equality --out DIR   # greedy tokens equal HF's (random SmolLM2-shaped model)
    python benchmarks/gpu_bench.py speed --out DIR [--kv-cache-dtype fp8]
        # batch-1 decode step vs weight bytes / 4.8 TB/s, then 512 requests x (512 in, 256 out)
    python benchmarks/gpu_bench.py hf --out DIR         # HF generate on the same requests, for the ratio

Models are random-weight configs written to a scratch folder (nothing is downloaded): a
SmolLM2-135M-shaped one saved as safetensors for equality, a Llama-3.1-8B-shaped one with
`load_format="dummy"` for speed. `--smoke` shrinks everything so the script itself can be checked
on a CPU.
"""

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch

H200_BANDWIDTH = 4.8e12  # bytes/s, the datasheet figure

SMOLLM2_SHAPE = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
)
LLAMA_8B_SHAPE = dict(
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    bos_token_id=128000,
    eos_token_id=128001,
    rope_parameters={
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
)
TINY_SHAPE = dict(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
)


def llama_config(shape: dict):
    from transformers import LlamaConfig

    return LlamaConfig(**shape)


def write_config_folder(shape: dict, folder: Path, weights: bool) -> Path:
    """config.json (and random safetensors weights when asked) for the engine and HF to load."""
    from transformers import LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    config = llama_config(shape)
    if weights:
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(folder)
    else:
        config.save_pretrained(folder)
    return folder


def random_prompts(count: int, length: int, vocab_size: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab_size) for _ in range(length)] for _ in range(count)]


def hf_greedy(folder: Path, prompts, max_new_tokens: int, dtype, device) -> list[list[int]]:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    outputs = []
    for prompt in prompts:
        ids = torch.tensor([prompt], device=device)
        out = model.generate(
            ids, max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0
        )
        outputs.append(out[0, len(prompt) :].tolist())
    return outputs


def engine_greedy(folder: Path, prompts, max_new_tokens: int, dtype: str, **engine_args) -> list[list[int]]:
    from kvtool.engine.runtime.config import SamplingParams
    from kvtool.engine.runtime.llm import LLM

    llm = LLM(model=str(folder), dtype=dtype, **engine_args)
    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, ignore_eos=True)
    outputs = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
    del llm
    free_device_memory()
    return [list(ids) for ids in outputs]


def compare(engine_out, hf_out) -> dict:
    def common_prefix(a, b):
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    prefixes = [common_prefix(a, b) for a, b in zip(engine_out, hf_out)]
    return {
        "equal": all(a == b for a, b in zip(engine_out, hf_out)),
        "matching_prefix_tokens": prefixes,
        "new_tokens": [len(b) for b in hf_out],
    }


def run_equality(args) -> dict:
    """Greedy tokens of the engine (batched, graphs on) vs HF generate one prompt at a time."""
    shape = TINY_SHAPE if args.smoke else SMOLLM2_SHAPE
    folder = write_config_folder(shape, Path(args.scratch) / "smollm2-shaped", weights=True)
    prompts = [p[:n] for p, n in zip(random_prompts(4, 250, shape["vocab_size"]), (7, 33, 100, 250))]
    new_tokens = 8 if args.smoke else 64
    result = {}
    for dtype in ("float32", "bfloat16"):
        hf = hf_greedy(folder, prompts, new_tokens, getattr(torch, dtype), args.device)
        free_device_memory()
        ours = engine_greedy(
            folder,
            prompts,
            new_tokens,
            dtype,
            device=args.device,
            max_model_len=512,
            gpu_memory_utilization=0.3,
            enforce_eager=args.eager,
        )
        result[dtype] = compare(ours, hf)
    return result


def speed_engine(args, kv_cache_dtype: str):
    from kvtool.engine.runtime.llm import LLM

    shape = TINY_SHAPE if args.smoke else LLAMA_8B_SHAPE
    folder = write_config_folder(shape, Path(args.scratch) / "llama-8b-shaped", weights=False)
    return LLM(
        model=str(folder),
        load_format="dummy",
        dtype="bfloat16",
        device=args.device,
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=args.input_len + args.output_len + 64,
        max_num_seqs=args.num_requests,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=0.9,
        enforce_eager=args.eager,
        enable_prefix_caching=False,
    ), shape


def weight_bytes(llm, read_per_step: bool = False) -> int:
    """All weight bytes; with read_per_step, less an untied embedding table (a step reads one row)."""
    model = llm.engine.model_runner.model
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if read_per_step and not model.tie_word_embeddings:
        embedding = model.model.embed_tokens.weight
        total -= embedding.numel() * embedding.element_size()
    return total


def timed_generate(llm, prompts, output_len: int) -> float:
    from kvtool.engine.runtime.config import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=output_len, ignore_eos=True)
    synchronize()
    start = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    synchronize()
    return time.perf_counter() - start


def run_speed(args) -> dict:
    """One engine: the batch-1 decode step, then output throughput on the full request set."""
    llm, shape = speed_engine(args, args.kv_cache_dtype)
    result = {
        "kv_cache_dtype": args.kv_cache_dtype,
        "kv_cache_tokens": llm.engine.kv_cache_info.kv_cache_tokens,
        "decode": decode_step(llm, shape, args),
        "throughput": throughput(llm, shape, args),
    }
    del llm
    free_device_memory()
    return result


def decode_step(llm, shape, args) -> dict:
    """Batch 1: the time of output_len more tokens, per token, against the bandwidth floor."""
    prompt = random_prompts(1, args.input_len, shape["vocab_size"])
    timed_generate(llm, prompt, 8)  # warm-up
    short = min(timed_generate(llm, prompt, 32) for _ in range(3))
    long = min(timed_generate(llm, prompt, 32 + args.output_len) for _ in range(2))
    step = (long - short) / args.output_len
    floor = weight_bytes(llm) / H200_BANDWIDTH
    return {
        "weight_bytes": weight_bytes(llm),
        "floor_ms": floor * 1e3,
        "step_ms": step * 1e3,
        "read_per_step_floor_ms": weight_bytes(llm, read_per_step=True) / H200_BANDWIDTH * 1e3,
        "ratio_to_floor": step / floor,
        "target_ratio": 1.25,
        "meets_target": 0 < step / floor <= 1.25,
    }


def throughput(llm, shape, args) -> dict:
    prompts = random_prompts(args.num_requests, args.input_len, shape["vocab_size"], seed=1)
    elapsed = timed_generate(llm, prompts, args.output_len)
    return {
        "requests": args.num_requests,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "elapsed_s": elapsed,
        "output_tokens_per_s": args.num_requests * args.output_len / elapsed,
    }


def run_hf(args) -> dict:
    """HF generate on the same kind of requests, static batches of --hf-batch-size."""
    from transformers import LlamaForCausalLM

    shape = TINY_SHAPE if args.smoke else LLAMA_8B_SHAPE
    torch.manual_seed(0)
    with torch.device(args.device):
        model = LlamaForCausalLM(llama_config(shape)).to(torch.bfloat16).eval()
    prompts = torch.tensor(random_prompts(args.hf_requests, args.input_len, shape["vocab_size"], seed=1))

    def generate(batch):
        return model.generate(
            batch.to(args.device),
            max_new_tokens=args.output_len,
            min_new_tokens=args.output_len,
            do_sample=False,
            pad_token_id=0,
        )

    generate(prompts[:2, :16])  # warm-up
    synchronize()
    start = time.perf_counter()
    for batch in prompts.split(args.hf_batch_size):
        generate(batch)
    synchronize()
    elapsed = time.perf_counter() - start
    return {
        "requests": args.hf_requests,
        "batch_size": args.hf_batch_size,
        "elapsed_s": elapsed,
        "output_tokens_per_s": args.hf_requests * args.output_len / elapsed,
    }


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def free_device_memory() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


CHECKS = {"equality": run_equality, "speed": run_speed, "hf": run_hf}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("--out", default=".", help="folder for <check>[-<kv dtype>].json")
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help="where model folders are written")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--num-requests", type=int, default=512)
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=16384)
    parser.add_argument("--hf-requests", type=int, default=256)
    parser.add_argument("--hf-batch-size", type=int, default=256)
    parser.add_argument("--eager", action="store_true", help="enforce_eager: no CUDA graphs")
    parser.add_argument("--smoke", action="store_true", help="tiny model and sizes, to check the script on CPU")
    args = parser.parse_args()
    if args.smoke:
        args.num_requests, args.input_len, args.output_len = 4, 16, 8
        args.hf_requests, args.hf_batch_size, args.max_num_batched_tokens = 4, 2, 64
    return args


def main() -> None:
    args = parse_args()
    result = {
        "check": args.check,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        **CHECKS[args.check](args),
    }
    suffix = f"-{args.kv_cache_dtype}" if args.check == "speed" else ""
    path = Path(args.out) / f"{args.check}{suffix}.json"
    path.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
