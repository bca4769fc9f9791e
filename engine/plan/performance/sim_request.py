"""What the simulated scheduler keeps per request and hands back: the request's progress, the run's outcome,
the scheduler limits it runs under, and what can hold a waiting request back."""

from dataclasses import dataclass, field

from kvtool.engine.plan.performance.metrics import RequestRecord, TokenGaps

KV, SEQS, BUDGET = "kv_capacity", "max_num_seqs", "step_budget"  # what keeps the head of the queue waiting


@dataclass(frozen=True)
class SchedulerLimits:
    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int  # blocks a request can be given (the pool less vLLM's null block)
    block_size: int


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
