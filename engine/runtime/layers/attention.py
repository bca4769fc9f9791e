"""Paged attention as the model sees it: write the step's K/V into the cache, then attend.

The batch is flattened with the decodes (one token per sequence) first and the prefill chunks
after them; each part goes to its kernel from `kvtool.kernels`.
"""

from dataclasses import dataclass

import torch


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] int64, where each token's K/V goes
    num_decodes: int  # the first num_decodes tokens are one-token decodes
    decode_block_tables: torch.Tensor  # [num_decodes, max_blocks] int32
    decode_context_lens: torch.Tensor  # [num_decodes] int32
    prefill_block_tables: torch.Tensor  # [num_prefills, max_blocks] int32
    prefill_cu_seqlens_q: torch.Tensor  # [num_prefills + 1] int32
    prefill_context_lens: torch.Tensor  # [num_prefills] int32
    decode_splits: list[int] | None = None  # decode groups of similar length [0, ..., num_decodes]; None: one
    # the same step for KV cache groups 1, 2, ... (their own slots and block tables); empty with one group
    group_metadata: tuple["AttentionMetadata", ...] = ()

    @property
    def num_prefills(self) -> int:
        return len(self.prefill_context_lens)


class PagedAttention:
    """One layer's view of the KV cache; `k_cache` / `v_cache` are bound by the model runner."""

    def __init__(self, ops, scale: float, sliding_window: int | None = None, logits_soft_cap: float | None = None):
        self.ops = ops
        self.scale = scale
        self.sliding_window = sliding_window  # a sliding layer sees only its last sliding_window tokens
        self.logits_soft_cap = logits_soft_cap  # scores become cap * tanh(score / cap) (Gemma 2)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None
        self.k_scale = 1.0
        self.v_scale = 1.0
        self.kv_cache_group = 0  # which block tables of the step this layer reads

    def __call__(self, query, key, value, meta: AttentionMetadata) -> torch.Tensor:
        if self.kv_cache_group and meta.group_metadata:
            meta = meta.group_metadata[self.kv_cache_group - 1]
        self.ops.store_kv(key, value, self.k_cache, self.v_cache, meta.slot_mapping, self.k_scale, self.v_scale)
        nd = meta.num_decodes
        if meta.num_prefills == 0:
            return self._decode(query, meta)
        if nd == 0:
            return self._prefill(query, meta)
        return torch.cat((self._decode(query[:nd], meta), self._prefill(query[nd:], meta)))

    def _decode(self, query, meta):
        """Decodes come sorted by length; each group is padded only to its own longest context."""
        splits = meta.decode_splits or [0, len(query)]
        parts = [
            self.ops.paged_decode_attention(
                query[a:b],
                self.k_cache,
                self.v_cache,
                meta.decode_block_tables[a:b],
                meta.decode_context_lens[a:b],
                self.scale,
                self.k_scale,
                self.v_scale,
                self.sliding_window,
                self.logits_soft_cap,
            )
            for a, b in zip(splits, splits[1:])
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _prefill(self, query, meta):
        return self.ops.prefill_attention(
            query,
            self.k_cache,
            self.v_cache,
            meta.prefill_block_tables,
            meta.prefill_cu_seqlens_q,
            meta.prefill_context_lens,
            self.scale,
            self.k_scale,
            self.v_scale,
            self.sliding_window,
            self.logits_soft_cap,
        )
