"""Turns sampled tokens into RequestOutputs: detokenizes, applies stop strings, keeps timestamps."""

import time
from dataclasses import dataclass, field

from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.detokenizer import IncrementalDetokenizer
from kvtool.engine.runtime.outputs import (
    CompletionOutput,
    PromptLogprobs,
    RequestMetrics,
    RequestOutput,
    SampleLogprobs,
)


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
    prompt_logprobs: PromptLogprobs | None = None  # filled chunk by chunk during prefill

    @property
    def finished(self) -> bool:
        return all(seq.is_finished for seq in self.seqs)


class OutputProcessor:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.requests: dict[str, RequestState] = {}
        self.token_texts: dict[int, str] = {}  # each token decoded alone, once

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
            [None] * len(prompt_token_ids) if params.prompt_logprobs is not None else None,
        )

    def add_prompt_logprobs(self, chunks: dict[str, tuple[int, list[dict]]]) -> None:
        """A step's scored prompt positions (request id -> first position, entries): entry i is prompt token
        first + 1 + i's."""
        for request_id, (first, entries) in chunks.items():
            state = self.requests.get(request_id)
            if state is not None:
                state.prompt_logprobs[first + 1 : first + 1 + len(entries)] = map(self._decorate, entries)

    def process(self, updated: list[Sequence], sample_logprobs: dict[int, dict], finish) -> list[RequestOutput]:
        """Outputs for the requests whose sequences got a token; `finish(seq, reason, stop)` ends one."""
        now = time.monotonic()
        touched: dict[str, RequestState] = {}
        for seq in updated:
            state = self.requests[seq.request_id]
            # the token that stopped the sequence is not detokenized unless its text is asked for (as vLLM)
            stopped_by_token = seq.finish_reason == "stop" and not seq.params.include_stop_str_in_output
            stop = state.detokenizers[seq.index].append(seq.last_token_id, decode=not stopped_by_token)
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
            prompt_logprobs=state.prompt_logprobs,
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
                logprob.decoded_token = self._token_text(token_id)
        return logprobs

    def _token_text(self, token_id: int) -> str:
        text = self.token_texts.get(token_id)
        if text is None:
            text = self.token_texts[token_id] = self.tokenizer.decode([token_id])
        return text
