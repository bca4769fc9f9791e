"""A scheduled step flattened into the model's inputs (vLLM's input batch): token ids, positions, each token's
KV slot, the attention metadata of every KV cache group, the rows to sample and the prompt rows to score."""

import dataclasses
from dataclasses import dataclass

import numpy
import torch

from kvtool.engine.runtime.core.kv_cache_groups import KVCacheLayout
from kvtool.engine.runtime.core.scheduler import SchedulerOutput
from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.worker.prompt_logprobs import PromptRows, prompt_rows

CPU_DECODE_GROUP = 8
NUMPY_DTYPES = {torch.long: numpy.int64, torch.int32: numpy.int32}


@dataclass
class ModelInput:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    logits_indices: torch.Tensor
    sample_seqs: list[Sequence]
    prompt_rows: list[PromptRows]
    inputs_embeds: torch.Tensor | None = None  # the first layer's input, when prompt embeddings replace some rows


class InputBatch:
    """Builds each step's ModelInput on `device`, with the slots of the KV cache's blocks of `block_size` tokens."""

    def __init__(self, block_size: int, device: torch.device, backend: str, kv_cache_layout: KVCacheLayout):
        self.block_size = block_size
        self.device = device
        self.backend = backend  # the kernels': the torch reference splits decodes by length
        self.kv_cache_layout = kv_cache_layout

    def prepare(self, scheduled: SchedulerOutput) -> ModelInput:
        """The step's rows: decodes first, then prefill chunks, as the scheduler ordered them."""
        input_ids, positions, slots, logits_indices, sample_seqs, scored = [], [], [], [], [], []
        for seq, num_new in zip(scheduled.seqs, scheduled.num_new_tokens):
            start, end = seq.num_computed_tokens, seq.num_computed_tokens + num_new
            if rows := prompt_rows(seq, start, end, len(input_ids)):
                scored.append(rows)
            input_ids.extend(seq.token_ids[start:end])
            positions.extend(range(start, end))
            slots.extend(self._slots(seq.block_table, start, end))
            if end == len(seq):
                logits_indices.append(len(input_ids) - 1)
                sample_seqs.append(seq)
        meta = self._attention_metadata(scheduled, slots)
        if self.kv_cache_layout.num_groups > 1:
            meta.group_metadata = tuple(
                self._group_metadata(scheduled, meta, g) for g in range(1, self.kv_cache_layout.num_groups)
            )
        return ModelInput(
            self.tensor(input_ids, torch.long),
            self.tensor(positions, torch.long),
            meta,
            self.tensor(logits_indices, torch.long),
            sample_seqs,
            scored,
        )

    def _group_metadata(self, scheduled: SchedulerOutput, meta: AttentionMetadata, group: int) -> AttentionMetadata:
        """Slots and block tables of another KV cache group; lengths and chunks are the step's."""
        slots = []
        for seq, num_new in zip(scheduled.seqs, scheduled.num_new_tokens):
            slots.extend(
                self._slots(seq.block_tables[group], seq.num_computed_tokens, seq.num_computed_tokens + num_new)
            )
        nd = scheduled.num_decodes
        tables = [seq.block_tables[group] for seq in scheduled.seqs]
        return dataclasses.replace(
            meta,
            slot_mapping=self.tensor(slots, torch.long),
            decode_block_tables=self._block_tables(tables[:nd]),
            prefill_block_tables=self._block_tables(tables[nd:]),
        )

    def _slots(self, block_table: list[int], start: int, end: int) -> list[int]:
        bs = self.block_size
        if end - start == 1:
            return [block_table[start // bs] * bs + start % bs]
        return [block_table[p // bs] * bs + p % bs for p in range(start, end)]

    def _attention_metadata(self, scheduled: SchedulerOutput, slots: list[int]) -> AttentionMetadata:
        nd = scheduled.num_decodes
        decodes, prefills = scheduled.seqs[:nd], scheduled.seqs[nd:]
        chunk_lens = scheduled.num_new_tokens[nd:]
        cu_seqlens = [0]
        for n in chunk_lens:
            cu_seqlens.append(cu_seqlens[-1] + n)
        return AttentionMetadata(
            slot_mapping=self.tensor(slots, torch.long),
            num_decodes=nd,
            decode_splits=self._decode_splits(nd),
            decode_block_tables=self._block_tables([s.block_table for s in decodes]),
            decode_context_lens=self.tensor([s.num_computed_tokens + 1 for s in decodes], torch.int32),
            prefill_block_tables=self._block_tables([s.block_table for s in prefills]),
            prefill_cu_seqlens_q=self.tensor(cu_seqlens, torch.int32),
            prefill_context_lens=self.tensor(
                [s.num_computed_tokens + n for s, n in zip(prefills, chunk_lens)], torch.int32
            ),
        )

    def _decode_splits(self, num_decodes: int) -> list[int]:
        """For the torch reference, up to 4 length groups so that short contexts are not padded to the longest."""
        if self.backend != "torch" or num_decodes <= CPU_DECODE_GROUP:
            return [0, num_decodes]
        size = max(CPU_DECODE_GROUP, -(-num_decodes // 4))
        return list(range(0, num_decodes, size)) + [num_decodes]

    def _block_tables(self, tables: list[list[int]]) -> torch.Tensor:
        width = max((len(t) for t in tables), default=0)
        rows = [t + [0] * (width - len(t)) for t in tables]
        return self.tensor(rows, torch.int32).view(len(tables), width)

    def tensor(self, data, dtype) -> torch.Tensor:
        """A host tensor copied to the device; pinned on CUDA so that the copy is truly asynchronous."""
        if self.device.type == "cpu":  # numpy's array: none of torch.tensor's ops to run cold after a step
            return torch.from_numpy(numpy.array(data, dtype=NUMPY_DTYPES[dtype]))
        pinned = self.device.type == "cuda"
        return torch.tensor(data, dtype=dtype, pin_memory=pinned).to(self.device, non_blocking=True)
