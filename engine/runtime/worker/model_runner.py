"""Runs one scheduled step on the device: flatten the batch, run the model, sample.

Hooks for the GPU path: `available_kv_bytes()` sizes the KV cache, and `run_model()` is the
forward a CUDA-graph runner can capture and replace for decode batches.
"""

import logging
import os
from dataclasses import dataclass

import torch

from kvtool.engine.runtime.core.kv_cache_groups import kv_cache_layout
from kvtool.engine.runtime.core.scheduler import SchedulerOutput
from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.models.llama import sliding_window
from kvtool.engine.runtime.models.rotary import head_dim
from kvtool.engine.runtime.prompt_embeds import step_inputs_embeds
from kvtool.engine.runtime.worker.cpu_malloc import keep_freed_memory
from kvtool.engine.runtime.worker.cpu_threads import CpuThreads
from kvtool.engine.runtime.worker.cuda_graph import capture_decode_graphs
from kvtool.engine.runtime.worker.fused_decode import FusedDecode
from kvtool.engine.runtime.worker.input_batch import InputBatch, ModelInput
from kvtool.engine.runtime.worker.kv_budget import MemorySnapshot, profile_kv_cache_bytes
from kvtool.engine.runtime.worker.loader import load_model
from kvtool.engine.runtime.worker.prompt_logprobs import mark_scored, score_prompts
from kvtool.engine.runtime.worker.sampler import Sampler
from kvtool.engine.sizing.defaults import CPU_KV_CACHE_CAP, CPU_KV_CACHE_RAM_FRACTION, default_cpu_threads
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.kernels import get_ops
from kvtool.kernels.cpu_linear import can_pack, pack_linears

logger = logging.getLogger("kvtool.engine")
FP8_KV_DTYPES = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


@dataclass
class ModelRunnerOutput:
    sampled: dict[int, int]  # seq_id -> new token
    logprobs: dict[int, dict]  # seq_id -> {token_id: Logprob}, for requests that asked
    prompt_logprobs: dict[str, tuple[int, list[dict]]]  # request id -> (first position, {token_id: Logprob} each)


class ModelRunner:
    """Reads its settings from the resolved EngineConfig; the model's facts (its HF config and files, the device
    and dtype it runs in, its end-of-sequence tokens) come beside it."""

    def __init__(
        self, config: EngineConfig, hf_config, source, device: torch.device, dtype: torch.dtype, eos_token_ids: set[int]
    ):
        self.config = config
        self.device = device
        self.dtype = dtype
        self.block_size = config.cache_config.block_size
        model_config, threads = config.model_config, config.device_config.threads
        self.ops = get_ops(device)
        self.memory_before_model = MemorySnapshot.take(device) if device.type == "cuda" else None
        # a fixed `threads` is kept; by default the team follows what other processes leave free
        self.cpu_threads = CpuThreads(os.sched_getaffinity(0)) if device.type == "cpu" and not threads else None
        if device.type == "cpu":
            # on the thread that runs the steps: torch and the C kernels size their team from it
            torch.set_num_threads(threads or default_cpu_threads())
            self.ops.flush_denormals(torch.get_num_threads())
            keep_freed_memory()
        self.graph_runner = None
        self.model = load_model(
            source,
            hf_config,
            self.ops,
            dtype,
            device,
            max(model_config.max_model_len, getattr(hf_config, "max_position_embeddings", 0)),
            model_config,
        )
        if can_pack(device, dtype):
            pack_linears(self.model)
            self.model.model.fused_decode = FusedDecode.for_model(self.model, self.ops)
        self.sampler = Sampler(eos_token_ids, model_config.seed, device)
        self.kv_cache: torch.Tensor | None = None
        self.kv_cache_layout = kv_cache_layout(
            [sliding_window(hf_config, i) for i in range(hf_config.num_hidden_layers)]
        )
        self.input_batch = InputBatch(self.block_size, device, self.ops.backend, self.kv_cache_layout)

    @property
    def kv_cache_dtype(self) -> torch.dtype:
        name = self.config.cache_config.kv_cache_dtype
        return self.dtype if name == "auto" else FP8_KV_DTYPES.get(name) or getattr(torch, name)

    def available_kv_bytes(self) -> int:
        """Bytes the KV cache may take: `kv_cache_memory` when set, else a device-specific budget."""
        if self.config.cache_config.kv_cache_memory is not None:
            return self.config.cache_config.kv_cache_memory
        if self.device.type == "cuda":
            return self._cuda_kv_bytes()
        return min(_available_ram() // CPU_KV_CACHE_RAM_FRACTION, CPU_KV_CACHE_CAP)

    def _cuda_kv_bytes(self) -> int:
        """total × gpu_memory_utilization minus what loading and one profile forward consumed (vLLM v1)."""
        scheduler = self.config.scheduler_config
        profile = profile_kv_cache_bytes(
            self.model,
            self.memory_before_model,
            self.config.cache_config.gpu_memory_utilization,
            scheduler.max_num_batched_tokens,
            scheduler.max_num_seqs,
            self.block_size,
            self.kv_cache_dtype,
            self.device,
        )
        return profile.available_kv_cache_bytes

    def num_pool_blocks(self, num_blocks: int) -> int:
        """Blocks of the shared pool when the cache holds `num_blocks` blocks of every layer."""
        return num_blocks * self.kv_cache_layout.num_groups

    def allocate_kv_cache(self, num_blocks: int) -> None:
        """One tensor [2, group_size, pool blocks, block_size, kv_heads, head_dim] holding `num_blocks`
        blocks of every layer; block 0 is the null block. With one KV cache group (no sliding layers,
        or only sliding ones) group_size is the number of layers and the pool has num_blocks blocks."""
        cfg, layout = self.model.config, self.kv_cache_layout
        shape = (
            2,
            layout.group_size,
            self.num_pool_blocks(num_blocks),
            self.block_size,
            cfg.num_key_value_heads,
            head_dim(cfg),
        )
        self.kv_cache = torch.zeros(shape, dtype=self.kv_cache_dtype, device=self.device)
        placements = [layout.placement(i) for i in range(cfg.num_hidden_layers)]
        self.model.bind_kv_cache(
            [self.kv_cache[0, t] for _, t in placements], [self.kv_cache[1, t] for _, t in placements]
        )
        for layer, (group, _) in zip(self.model.model.layers, placements):
            layer.self_attn.attn.kv_cache_group = group
        if layout.num_groups > 1 and not self.config.model_config.enforce_eager and self.device.type == "cuda":
            logger.info("CUDA graphs are off: the model has %d KV cache groups", layout.num_groups)
            return
        self.graph_runner = capture_decode_graphs(self.model, self.config, self.device)

    @torch.inference_mode()
    def execute(self, scheduled: SchedulerOutput) -> ModelRunnerOutput:
        if self.cpu_threads is not None:
            self.cpu_threads.update()
        batch = self.input_batch.prepare(scheduled)
        if self.config.model_config.enable_prompt_embeds:
            embed = self.model.model.embed_input_ids
            batch.inputs_embeds = step_inputs_embeds(embed, scheduled.seqs, scheduled.num_new_tokens, batch.input_ids)
        hidden, prompt_logprobs = None, {}
        if batch.prompt_rows:  # the hidden states of every row, not only of the sampled ones
            hidden = self.run_model(batch.input_ids, batch.positions, batch.meta, batch.inputs_embeds)
            prompt_logprobs = score_prompts(self.model, hidden, batch.prompt_rows, self.input_batch.tensor)
        logits = self._logits(batch, hidden)
        output = ModelRunnerOutput({}, {}, prompt_logprobs)
        if logits is not None:
            result = self.sampler(logits, batch.sample_seqs)
            ids = [seq.seq_id for seq in batch.sample_seqs]
            output.sampled = dict(zip(ids, result.token_ids))
            output.logprobs = {i: lp for i, lp in zip(ids, result.logprobs) if lp is not None}
        mark_scored(batch.prompt_rows)  # once the step cannot fail any more
        return output

    def _logits(self, batch: ModelInput, hidden: torch.Tensor | None = None) -> torch.Tensor | None:
        """The logits of the sampled rows (None where none is), in one call with the layers where the model can."""
        # one index per sampled sequence, each past the last: as many as rows means every row, in order
        every_row = len(batch.logits_indices) == len(batch.input_ids)
        if every_row and hidden is None and batch.inputs_embeds is None:
            logits = self.model.decode_logits(batch.input_ids, batch.positions, batch.meta)
            if logits is not None:
                return logits
        if hidden is None:
            hidden = self.run_model(batch.input_ids, batch.positions, batch.meta, batch.inputs_embeds)
        if not batch.sample_seqs:
            return None
        return self.model.compute_logits(hidden if every_row else hidden[batch.logits_indices])

    def run_model(self, input_ids, positions, meta: AttentionMetadata, inputs_embeds=None) -> torch.Tensor:
        if self.graph_runner is not None and inputs_embeds is None:
            hidden = self.graph_runner.run(input_ids, positions, meta)
            if hidden is not None:
                return hidden
        return self.model(input_ids, positions, meta, inputs_embeds)


def _available_ram() -> int:
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
