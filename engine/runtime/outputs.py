"""What the engine hands back per request: vLLM's RequestOutput / CompletionOutput shapes.

Each RequestOutput of a stream carries the whole output so far (`text`, `token_ids`) and what is
new since the previous one (`delta_text`, `delta_token_ids`, `delta_logprobs`).
"""

from dataclasses import dataclass, field


@dataclass(slots=True)
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# One entry per generated token: candidate token id -> its Logprob, the sampled one first.
SampleLogprobs = list[dict[int, Logprob]]
# One entry per prompt token: None for the first (nothing predicts it), then the prompt token first.
PromptLogprobs = list[dict[int, Logprob] | None]


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: SampleLogprobs | None = None
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error"
    stop_reason: int | str | None = None  # the stop string or stop token id that ended it
    delta_text: str = ""
    delta_token_ids: list[int] = field(default_factory=list)
    delta_logprobs: SampleLogprobs | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Timestamps (time.monotonic seconds) of one request's life."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_preemptions: int = 0


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    metrics: RequestMetrics | None = None
    error: str | None = None  # why it failed, when finish_reason is "error"
    prompt_logprobs: PromptLogprobs | None = None  # complete once the prompt is prefilled, for requests that ask
