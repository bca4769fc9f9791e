"""Turns sampled tokens into RequestOutputs: detokenizes, applies stop strings, keeps timestamps."""

import time
from dataclasses import dataclass, field

from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.detokenizer import IncrementalDetokenizer
from kvtool.engine.runtime.outputs import CompletionOutput, RequestMetrics, RequestOutput, SampleLogprobs


@dataclass
class RequestState:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    seqs: list[Sequence]
    detokenizers: list[IncrementalDetokenizer]
    metrics: RequestMetrics
    logprobs: list[SampleLogprobs | None] = field(default_factory=list)
    num_sent: list[int] = field(default_factory=list)  # tokens already streamed, per sequence

    @property
    def finished(self) -> bool:
        return all(seq.is_finished for seq in self.seqs)


class OutputProcessor:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.requests: dict[str, RequestState] = {}

    def add_request(
        self, request_id: str, prompt: str | None, prompt_token_ids: list[int], seqs: list[Sequence]
    ) -> None:
        params = seqs[0].params
        detokenizers = [
            IncrementalDetokenizer(
                self.tokenizer, params.stop, params.include_stop_str_in_output, params.skip_special_tokens
            )
            for _ in seqs
        ]
        logprobs = [[] if params.num_logprobs is not None else None for _ in seqs]
        self.requests[request_id] = RequestState(
            request_id,
            prompt,
            prompt_token_ids,
            seqs,
            detokenizers,
            RequestMetrics(seqs[0].arrival_time),
            logprobs,
            [0] * len(seqs),
        )

    def process(self, updated: list[Sequence], sample_logprobs: dict[int, dict], finish) -> list[RequestOutput]:
        """Outputs for the requests whose sequences got a token; `finish(seq, reason, stop)` ends one."""
        now = time.monotonic()
        touched: dict[str, RequestState] = {}
        for seq in updated:
            state = self.requests[seq.request_id]
            stop = state.detokenizers[seq.index].append(seq.last_token_id)
            if stop is not None and not seq.is_finished:
                finish(seq, "stop", stop)
            if state.logprobs[seq.index] is not None:
                state.logprobs[seq.index].append(self._decorate(sample_logprobs.get(seq.seq_id) or {}))
            state.metrics.first_token_time = state.metrics.first_token_time or now
            state.metrics.last_token_time = now
            touched[seq.request_id] = state
        return [self._output(state, now) for state in touched.values()]

    def abort(self, request_id: str) -> RequestOutput | None:
        state = self.requests.get(request_id)
        return self._output(state, time.monotonic()) if state else None

    def _output(self, state: RequestState, now: float) -> RequestOutput:
        finished = state.finished
        if finished:
            state.metrics.finished_time = now
            state.metrics.num_preemptions = sum(s.num_preemptions for s in state.seqs)
            del self.requests[state.request_id]
        outputs = [self._completion(state, i) for i in range(len(state.seqs))]
        return RequestOutput(
            state.request_id,
            state.prompt,
            state.prompt_token_ids,
            outputs,
            finished,
            max(s.num_cached_tokens for s in state.seqs),
            state.metrics,
        )

    def _completion(self, state: RequestState, i: int) -> CompletionOutput:
        seq, detok, logprobs = state.seqs[i], state.detokenizers[i], state.logprobs[i]
        token_ids = seq.output_token_ids
        start, state.num_sent[i] = state.num_sent[i], len(token_ids)
        delta_text = detok.take_delta(seq.is_finished)
        return CompletionOutput(
            i,
            detok.text[: detok.num_sent],
            token_ids,
            logprobs,
            seq.finish_reason,
            seq.stop_reason,
            delta_text=delta_text,
            delta_token_ids=token_ids[start:],
            delta_logprobs=None if logprobs is None else logprobs[start:],
        )

    def _decorate(self, logprobs: dict) -> dict:
        if self.tokenizer is not None:
            for token_id, logprob in logprobs.items():
                logprob.decoded_token = self.tokenizer.decode([token_id])
        return logprobs
