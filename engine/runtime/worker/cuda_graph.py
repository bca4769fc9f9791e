"""CUDA graphs for decode steps: capture the forward once per batch size, then replay it.

A decode step of a small model is mostly kernel-launch overhead; a graph replays all of a step's
launches at once. Graphs are captured for batch sizes 1, 2, 4 and then every multiple of 8 up to
max_num_seqs (vLLM's list); a batch runs on the smallest graph that holds it, padded with rows that
write nothing (slot -1) and attend to nothing (context length 0). Prefill steps and mixed steps run
eagerly. `enforce_eager` turns all of this off.
"""

import logging
import time
from dataclasses import dataclass

import torch

from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.sizing.units import GiB

logger = logging.getLogger("kvtool.engine")


def capture_sizes(max_num_seqs: int) -> list[int]:
    """1, 2, 4, 8, 16, 24, ... up to max_num_seqs, which is always included."""
    sizes = [s for s in (1, 2, 4) if s < max_num_seqs] + list(range(8, max_num_seqs, 8))
    return sizes + [max_num_seqs]


@dataclass
class DecodeBuffers:
    """Static inputs of the captured graphs: the largest batch; each graph uses the first rows."""

    input_ids: torch.Tensor  # [N] int64
    positions: torch.Tensor  # [N] int64
    slot_mapping: torch.Tensor  # [N] int64, -1 on padded rows
    block_tables: torch.Tensor  # [N, max_blocks_per_seq] int32
    context_lens: torch.Tensor  # [N] int32, 0 on padded rows

    @classmethod
    def allocate(cls, max_batch: int, max_blocks_per_seq: int, device) -> "DecodeBuffers":
        def zeros(*shape, dtype=torch.int64):
            return torch.zeros(*shape, dtype=dtype, device=device)

        return cls(
            zeros(max_batch),
            zeros(max_batch),
            torch.full((max_batch,), -1, dtype=torch.int64, device=device),
            zeros(max_batch, max_blocks_per_seq, dtype=torch.int32),
            zeros(max_batch, dtype=torch.int32),
        )

    def fill(self, input_ids, positions, meta: AttentionMetadata, padded: int) -> None:
        """Copy a batch of `len(input_ids)` decodes in; rows up to `padded` become no-op rows."""
        batch, width = len(input_ids), meta.decode_block_tables.shape[1]
        self.input_ids[:batch].copy_(input_ids, non_blocking=True)
        self.positions[:batch].copy_(positions, non_blocking=True)
        self.slot_mapping[:batch].copy_(meta.slot_mapping, non_blocking=True)
        self.block_tables[:batch, :width].copy_(meta.decode_block_tables, non_blocking=True)
        self.context_lens[:batch].copy_(meta.decode_context_lens, non_blocking=True)
        self.slot_mapping[batch:padded].fill_(-1)
        self.context_lens[batch:padded].fill_(0)

    def metadata(self, batch: int) -> AttentionMetadata:
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:batch],
            num_decodes=batch,
            decode_block_tables=self.block_tables[:batch],
            decode_context_lens=self.context_lens[:batch],
            prefill_block_tables=self.block_tables[:0],
            prefill_cu_seqlens_q=self.context_lens[:1] * 0,
            prefill_context_lens=self.context_lens[:0],
        )


class CUDAGraphRunner:
    """Holds one captured decode graph per batch size and replays the one that fits a batch."""

    def __init__(self, model, max_num_seqs: int, max_model_len: int, block_size: int, device):
        self.model = model
        self.sizes = capture_sizes(max_num_seqs)
        max_blocks = -(-max_model_len // block_size)
        self.buffers = DecodeBuffers.allocate(self.sizes[-1], max_blocks, device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}

    @torch.inference_mode()
    def capture(self) -> None:
        """Capture the largest batch first so that the smaller graphs reuse its memory pool."""
        pool = None
        for size in reversed(self.sizes):
            self.forward_padded(size)  # warm-up: compiles the Triton kernels outside capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.outputs[size] = self.forward_padded(size)
            pool = graph.pool()
            self.graphs[size] = graph
        torch.cuda.synchronize()

    def forward_padded(self, size: int) -> torch.Tensor:
        buffers = self.buffers
        return self.model(buffers.input_ids[:size], buffers.positions[:size], buffers.metadata(size))

    def padded_size(self, meta: AttentionMetadata, num_tokens: int) -> int | None:
        """The graph size for this step, or None when it must run eagerly (prefills, too large)."""
        if meta.num_prefills or meta.num_decodes != num_tokens:
            return None
        if meta.decode_block_tables.shape[1] > self.buffers.block_tables.shape[1]:
            return None
        return next((s for s in self.sizes if s >= num_tokens), None)

    def run(self, input_ids, positions, meta: AttentionMetadata) -> torch.Tensor | None:
        """Replay the fitting graph and return the real rows' hidden states; None = run eagerly."""
        batch = len(input_ids)
        size = self.padded_size(meta, batch)
        if size is None or size not in self.graphs:
            return None
        self.buffers.fill(input_ids, positions, meta, size)
        self.graphs[size].replay()
        return self.outputs[size][:batch]


def capture_decode_graphs(model, config, device) -> CUDAGraphRunner | None:
    """Captured decode graphs on CUDA unless `enforce_eager` (of an EngineConfig); None elsewhere (steps run
    eagerly)."""
    model_config = config.model_config
    if device.type != "cuda" or model_config.enforce_eager:
        return None
    start, free_before = time.perf_counter(), torch.cuda.mem_get_info(device)[0]
    sizes = (config.scheduler_config.max_num_seqs, model_config.max_model_len, config.cache_config.block_size)
    runner = CUDAGraphRunner(model, *sizes, device)
    runner.capture()
    took = (free_before - torch.cuda.mem_get_info(device)[0]) / GiB
    logger.info("Graph capturing finished in %.0f secs, took %.2f GiB", time.perf_counter() - start, took)
    return runner
