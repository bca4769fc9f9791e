"""KV-cache sizing on CUDA by profiling, as vLLM v1 (0.27 → 0.33) does it.

    requested      = ceil(total × gpu_memory_utilization)
    consumed       = free memory before the model was created − free memory after the profile run
    peak headroom  = torch's peak allocation during the profile − what stays allocated after it
    non-KV memory  = consumed + peak headroom
    available KV   = requested − non-KV memory

The profile run is one forward at max_num_batched_tokens (spread over up to max_num_seqs
prefills) plus the logits of max_num_seqs rows, on a throw-away one-block cache. Memory other
processes held before start-up does not shrink the budget; it only makes start-up fail (with
vLLM's message) when free memory is below the request.
"""

import math
from dataclasses import dataclass

import torch

from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.models.rotary import head_dim
from kvtool.engine.sizing import messages
from kvtool.engine.sizing.units import GiB
from kvtool.errors import StartupError


@dataclass(frozen=True)
class MemorySnapshot:
    free_bytes: int
    total_bytes: int
    torch_peak_bytes: int
    torch_allocated_bytes: int

    @classmethod
    def take(cls, device) -> "MemorySnapshot":
        torch.cuda.synchronize(device)
        free, total = torch.cuda.mem_get_info(device)
        return cls(free, total, torch.cuda.max_memory_allocated(device), torch.cuda.memory_allocated(device))


@dataclass(frozen=True)
class KVMemoryProfile:
    requested_bytes: int
    non_kv_cache_bytes: int
    available_kv_cache_bytes: int

    def log_line(self) -> str:
        return f"Available KV cache memory: {self.available_kv_cache_bytes / GiB:.2f} GiB"


def kv_memory_profile(
    before_model: MemorySnapshot, after_profile: MemorySnapshot, gpu_memory_utilization: float
) -> KVMemoryProfile:
    requested = math.ceil(before_model.total_bytes * gpu_memory_utilization)
    consumed = before_model.free_bytes - after_profile.free_bytes
    headroom = after_profile.torch_peak_bytes - after_profile.torch_allocated_bytes
    non_kv = consumed + headroom
    return KVMemoryProfile(requested, non_kv, max(0, requested - non_kv))


def check_free_memory(before_model: MemorySnapshot, gpu_memory_utilization: float, device) -> None:
    """Start-up fails, in vLLM's words, when other processes leave less free than total × utilization."""
    requested = math.ceil(before_model.total_bytes * gpu_memory_utilization)
    if before_model.free_bytes >= requested:
        return
    raise StartupError(
        messages.FREE_MEMORY_BELOW_UTILIZATION.format(
            device=device,
            free_gib=round(before_model.free_bytes / GiB, 2),
            total_gib=round(before_model.total_bytes / GiB, 2),
            gpu_memory_utilization=gpu_memory_utilization,
            requested_gib=round(requested / GiB, 2),
        )
    )


def profile_kv_cache_bytes(
    model,
    before_model: MemorySnapshot,
    gpu_memory_utilization: float,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    block_size: int,
    kv_cache_dtype: torch.dtype,
    device,
) -> KVMemoryProfile:
    """Run the profile forward and return what is left of total × utilization for the KV cache."""
    check_free_memory(before_model, gpu_memory_utilization, device)
    torch.cuda.reset_peak_memory_stats(device)
    profile_forward(model, max_num_batched_tokens, max_num_seqs, block_size, kv_cache_dtype, device)
    after = MemorySnapshot.take(device)
    return kv_memory_profile(before_model, after, gpu_memory_utilization)


@torch.inference_mode()
def profile_forward(model, num_tokens: int, num_seqs: int, block_size: int, kv_cache_dtype, device) -> torch.Tensor:
    """One forward at `num_tokens` spread over `num_seqs` prefills, then their logits; returns them."""
    num_seqs = max(1, min(num_seqs, num_tokens))
    k_cache, v_cache = _scratch_caches(model.config, block_size, kv_cache_dtype, device)
    model.bind_kv_cache(k_cache, v_cache)
    meta = profile_metadata(num_tokens, num_seqs, block_size, device)
    input_ids = torch.zeros(num_tokens, dtype=torch.long, device=device)
    positions = _positions(meta.prefill_cu_seqlens_q, num_tokens)
    hidden = model(input_ids, positions, meta)
    last_rows = meta.prefill_cu_seqlens_q[1:].long() - 1
    logits = model.compute_logits(hidden[last_rows])
    model.bind_kv_cache([None] * len(k_cache), [None] * len(v_cache))
    return logits


def profile_metadata(num_tokens: int, num_seqs: int, block_size: int, device) -> AttentionMetadata:
    """Prefills of near-equal length whose block tables all point at the scratch block 0."""
    lens = [num_tokens // num_seqs + (i < num_tokens % num_seqs) for i in range(num_seqs)]
    cu_seqlens = torch.tensor([0, *lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    width = -(-max(lens) // block_size)
    return AttentionMetadata(
        slot_mapping=torch.full((num_tokens,), -1, dtype=torch.long, device=device),  # nothing stored
        num_decodes=0,
        decode_block_tables=torch.zeros(0, width, dtype=torch.int32, device=device),
        decode_context_lens=torch.zeros(0, dtype=torch.int32, device=device),
        prefill_block_tables=torch.zeros(num_seqs, width, dtype=torch.int32, device=device),
        prefill_cu_seqlens_q=cu_seqlens.to(device),
        prefill_context_lens=torch.tensor(lens, dtype=torch.int32, device=device),
    )


def _positions(cu_seqlens: torch.Tensor, num_tokens: int) -> torch.Tensor:
    starts = cu_seqlens[:-1].long()
    seq_of_token = torch.searchsorted(
        cu_seqlens[1:].long(), torch.arange(num_tokens, device=cu_seqlens.device), right=True
    )
    return torch.arange(num_tokens, device=cu_seqlens.device) - starts[seq_of_token]


def _scratch_caches(config, block_size: int, kv_cache_dtype, device):
    shape = (config.num_hidden_layers, 1, block_size, config.num_key_value_heads, head_dim(config))
    return (
        torch.zeros(shape, dtype=kv_cache_dtype, device=device),
        torch.zeros(shape, dtype=kv_cache_dtype, device=device),
    )
