"""Continuous batching, vLLM v1 style: no prefill/decode phases, a token budget per step.

Each step the running sequences go first (a decode is one token, an unfinished prefill a chunk),
then waiting ones are admitted while the budget, the sequence cap and free blocks allow. When a
running sequence needs a block and none is free, the newest running one is preempted by recompute.
"""

from collections import deque
from dataclasses import dataclass

from kvtool.engine.runtime.core.block_manager import BlockManager
from kvtool.engine.runtime.core.sequence import Sequence, SequenceStatus
from kvtool.engine.sizing.engine_config import EngineConfig


@dataclass
class SchedulerOutput:
    """One step's work: decodes (one token each, shortest first), then prefill chunks."""

    seqs: list[Sequence]
    num_new_tokens: list[int]
    num_decodes: int

    @property
    def total_tokens(self) -> int:
        return sum(self.num_new_tokens)


@dataclass
class SchedulerStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    num_preemptions: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    num_blocks: int
    num_free_blocks: int


class Scheduler:
    """Reads its limits from the resolved EngineConfig; the model's end-of-sequence tokens come beside it."""

    def __init__(self, config: EngineConfig, block_manager: BlockManager, eos_token_ids: set[int]):
        self.block_manager = block_manager
        scheduler = config.scheduler_config
        self.max_num_seqs = scheduler.max_num_seqs
        self.max_num_batched_tokens = scheduler.max_num_batched_tokens
        self.max_model_len = config.model_config.max_model_len
        self.enable_chunked_prefill = scheduler.enable_chunked_prefill
        self.eos_token_ids = eos_token_ids
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int]] = []
        budget, preempted = self._schedule_running(scheduled, budget)
        if not preempted:
            self._schedule_waiting(scheduled, budget)
        scheduled.sort(key=lambda item: (item[1] != 1, len(item[0]) if item[1] == 1 else 0))  # decodes first, by length
        seqs = [seq for seq, _ in scheduled]
        counts = [n for _, n in scheduled]
        return SchedulerOutput(seqs, counts, sum(1 for n in counts if n == 1))

    def _schedule_running(self, scheduled, budget) -> tuple[int, bool]:
        preempted, i = False, 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            num_new = min(seq.num_uncomputed_tokens, budget)
            while not self.block_manager.allocate_slots(seq, num_new):
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            else:
                scheduled.append((seq, num_new))
                budget -= num_new
                i += 1
        return budget, preempted

    def _schedule_waiting(self, scheduled, budget) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            computed = self.block_manager.get_computed_blocks(seq)
            num_new = len(seq) - len(computed) * self.block_manager.block_size
            if num_new > budget and not self.enable_chunked_prefill:
                break
            num_new = min(num_new, budget)
            if not self.block_manager.allocate_slots(seq, num_new, computed):
                break
            self.waiting.popleft()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            scheduled.append((seq, num_new))
            budget -= num_new

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.free(seq)
        seq.reset_for_recompute()
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def update_from_output(self, output: SchedulerOutput, sampled: dict[int, int]) -> list[Sequence]:
        """Advance computed tokens, append sampled ones (seq_id -> token) and apply token stops.

        Returns the sequences that got a new token this step.
        """
        updated = []
        for seq, num_new in zip(output.seqs, output.num_new_tokens):
            if seq.is_finished:  # aborted while the step ran
                continue
            seq.num_computed_tokens += num_new
            self.block_manager.cache_full_blocks(seq)
            if seq.seq_id in sampled:
                seq.append_token(sampled[seq.seq_id])
                self._check_token_stop(seq)
                updated.append(seq)
        return updated

    def _check_token_stop(self, seq: Sequence) -> None:
        params, token = seq.params, seq.last_token_id
        past_min = seq.num_output_tokens >= params.min_tokens
        if seq.grammar is not None and seq.grammar.is_terminated():  # the constrained output is complete
            self.finish(seq, "stop")
        elif past_min and not params.ignore_eos and token in self.eos_token_ids:
            self.finish(seq, "stop")
        elif past_min and token in params.stop_token_ids:
            self.finish(seq, "stop", token)
        elif seq.num_output_tokens >= seq.max_tokens or len(seq) >= self.max_model_len:
            self.finish(seq, "length")

    def finish(self, seq: Sequence, reason: str, stop_reason: int | str | None = None) -> None:
        """End a sequence (stop, length or abort) and give its blocks back."""
        if seq.is_finished:
            return
        seq.finish(reason, stop_reason)
        self.block_manager.free(seq)
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def stats(self) -> SchedulerStats:
        bm = self.block_manager
        return SchedulerStats(
            len(self.running),
            len(self.waiting),
            bm.usage,
            self.num_preemptions,
            bm.prefix_cache_queries,
            bm.prefix_cache_hits,
            bm.num_blocks,
            bm.num_free_blocks,
        )
