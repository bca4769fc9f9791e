"""The decoder run on the Triton op set gives the hidden states it gives on the torch references:
a prefill of two prompts into an empty paged cache, then a decode step on top of it."""

import pytest
import torch
from transformers import LlamaConfig

pytest.importorskip("triton")

from kvtool.engine.attention import AttentionMetadata  # noqa: E402
from kvtool.engine.loader import load_model  # noqa: E402
from kvtool.kernels import OP_NAMES, KernelOps, reference, triton_ops  # noqa: E402
from paged_cases import BLOCK_SIZE  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CONFIG = LlamaConfig(vocab_size=128, hidden_size=384, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=128)
TABLES = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)      # seq 0 crosses a block boundary


def ops_from(module, backend):
    return KernelOps(backend, *(getattr(module, name) for name in OP_NAMES))


def slots_and_positions(lens_before, new_tokens):
    slots, positions = [], []
    for b, (start, n) in enumerate(zip(lens_before, new_tokens)):
        for p in range(start, start + n):
            slots.append(int(TABLES[b, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE)
            positions.append(p)
    return torch.tensor(slots, device=DEVICE), torch.tensor(positions, device=DEVICE)


def prefill_step(prompt_lens):
    slots, positions = slots_and_positions([0] * len(prompt_lens), prompt_lens)
    cu_seqlens = torch.tensor([0, *torch.tensor(prompt_lens).cumsum(0).tolist()], dtype=torch.int32)
    none = torch.zeros(0, dtype=torch.int32, device=DEVICE)
    return positions, AttentionMetadata(
        slot_mapping=slots, num_decodes=0, decode_block_tables=TABLES[:0].to(DEVICE), decode_context_lens=none,
        prefill_block_tables=TABLES.to(DEVICE), prefill_cu_seqlens_q=cu_seqlens.to(DEVICE),
        prefill_context_lens=torch.tensor(prompt_lens, dtype=torch.int32, device=DEVICE))


def decode_step(context_lens):
    slots, positions = slots_and_positions([n - 1 for n in context_lens], [1] * len(context_lens))
    none = torch.zeros(0, dtype=torch.int32, device=DEVICE)
    return positions, AttentionMetadata(
        slot_mapping=slots, num_decodes=len(context_lens), decode_block_tables=TABLES.to(DEVICE),
        decode_context_lens=torch.tensor(context_lens, dtype=torch.int32, device=DEVICE),
        prefill_block_tables=TABLES[:0].to(DEVICE), prefill_cu_seqlens_q=torch.zeros(1, dtype=torch.int32,
                                                                                      device=DEVICE),
        prefill_context_lens=none)


@torch.inference_mode()
def run_two_steps(ops):
    model = load_model(None, CONFIG, ops, torch.float32, DEVICE, 128, "dummy", seed=0)
    shape = (CONFIG.num_hidden_layers, 6, BLOCK_SIZE, CONFIG.num_key_value_heads, 64)
    model.bind_kv_cache(torch.zeros(shape, device=DEVICE), torch.zeros(shape, device=DEVICE))
    ids = torch.randint(0, 128, (29,), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    prefill = model(ids[:27], *prefill_step([20, 7]))
    decode = model(ids[27:], *decode_step([21, 8]))
    return prefill, decode


def test_triton_ops_drive_the_model_like_the_references():
    for got, expected in zip(run_two_steps(ops_from(triton_ops, "triton")),
                             run_two_steps(ops_from(reference, "torch"))):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
