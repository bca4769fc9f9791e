"""One sequence being generated: its tokens, how far the KV cache has computed them, its blocks."""

import itertools
import time
from enum import Enum, auto

from kvtool.engine.runtime.config import SamplingParams


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    """A prompt plus its output tokens; a request with n > 1 has n of them (index 0..n-1)."""

    _ids = itertools.count()

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        max_tokens: int,
        index: int = 0,
        arrival_time: float | None = None,
        prompt_embeds: tuple = (),
    ):
        self.seq_id = next(Sequence._ids)
        self.request_id = request_id
        self.index = index
        self.params = params
        self.max_tokens = max_tokens
        self.token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.prompt_embeds = prompt_embeds  # EmbedsSpans: rows that replace some prompt positions' embeddings
        self.status = SequenceStatus.WAITING
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0  # prompt tokens found in the prefix cache at admission
        self.num_scored_prompt_rows = 0  # prompt positions whose logprobs are computed (prompt_logprobs requests)
        self.block_tables: list[list[int]] = []  # one per KV cache group, made by the block manager
        self.block_hashes: list[int] = []  # chained hashes of this sequence's full blocks
        self.arrival_time = arrival_time if arrival_time is not None else time.monotonic()
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.num_preemptions = 0
        self.generator = None  # torch.Generator for a seeded request, made by the sampler
        self.grammar = None  # an xgrammar GrammarMatcher when the output is constrained

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def block_table(self) -> list[int]:
        """The block table of the first KV cache group (the only one unless layers slide)."""
        return self.block_tables[0] if self.block_tables else []

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def last_token_id(self) -> int:
        return self.token_ids[-1]

    @property
    def scores_prompt(self) -> bool:
        """Its prompt logprobs are asked for and not all computed yet (once per request: sequence 0 scores)."""
        return (
            self.params.prompt_logprobs is not None
            and self.index == 0
            and self.num_scored_prompt_rows < self.num_prompt_tokens - 1
        )

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def finish(self, reason: str, stop_reason: int | str | None = None) -> None:
        self.status = SequenceStatus.FINISHED
        self.finish_reason = reason
        self.stop_reason = stop_reason

    def reset_for_recompute(self) -> None:
        """Preempted: its blocks are gone, so every token will be computed again."""
        self.status = SequenceStatus.WAITING
        self.num_computed_tokens = 0
        self.block_tables = []
        self.num_preemptions += 1
