"""What the simulated scheduler keeps per request and hands back: the request's progress, the run's outcome,
the scheduler limits it runs under, and what can hold a waiting request back."""

from dataclasses import dataclass, field

from kvtool.engine.plan.performance.metrics import RequestRecord, TokenGaps
from kvtool.errors import UsageError

KV, SEQS, BUDGET = "kv_capacity", "max_num_seqs", "step_budget"  # what keeps the head of the queue waiting


@dataclass(frozen=True)
class SchedulerLimits:
    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int  # blocks a request can be given (the pool less vLLM's null block)
    block_size: int

    def __post_init__(self):
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, name) < 1:
                raise UsageError(
                    f"served performance: {name} {getattr(self, name)} lets the scheduler run no request.",
                    f"Give --{name.replace('_', '-')} of at least 1.",
                )

    def blocks_for(self, tokens: int) -> int:
        """Blocks one request holds once `tokens` (prompt and output) are through: the last token sampled is
        never fed back, so it takes no slot."""
        return cdiv(max(tokens - 1, 1), self.block_size)

    def check_servable(self, tokens: int) -> None:
        """vLLM's start-up check keeps a request from needing more blocks than the whole pool; a forecast given
        such a pool says no request could be served rather than wait for one."""
        if self.blocks_for(tokens) > self.num_blocks:
            raise self.unservable(tokens)

    def unservable(self, tokens: int) -> UsageError:
        return UsageError(
            f"served performance: one request of {tokens:,} tokens needs {self.blocks_for(tokens):,} KV blocks and "
            f"the KV cache holds {max(self.num_blocks, 0):,}; no request could be served.",
            "Shorten the workload, or give the KV cache more room (--gpu-memory-utilization, --kv-cache-dtype fp8, "
            "a larger --tp).",
        )


class SimRequest:
    """One request's progress through the scheduler: tokens to prefill (`target`, the prompt or, after a
    preemption, the prompt and its output so far), computed, generated; as a decode, the step it began at."""

    __slots__ = (
        "record",
        "target",
        "computed",
        "generated",
        "since",
        "context",
        "finish_step",
        "version",
        "last",
        "evicted_at",
        "held",
    )

    def __init__(self, record: RequestRecord):
        self.record, self.target, self.computed, self.generated = record, record.input_tokens, 0, 0
        self.since = self.context = self.finish_step = self.version = self.held = 0
        self.last = 0.0  # when its last token came, while it waits to be recomputed
        self.evicted_at = 0.0  # the pool's allocation count when it was preempted


@dataclass
class Outcome:
    records: list[RequestRecord]
    gaps: TokenGaps
    preemptions: int = 0
    waiting: dict[str, float] = field(default_factory=dict)  # request-seconds spent waiting, by what held them
    busy_seconds: float = 0.0
    compute_seconds: float = 0.0  # of the busy time, where FLOPs rather than bytes set the pace


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
