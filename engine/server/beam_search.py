"""Beam search as vLLM 0.33's serving layer runs it on top of the engine (vllm/entrypoints/generate/beam_search/).

Every step sends each live beam to the engine as a request of its own for one token with 2 x beam_width
logprobs (prefix caching keeps the shared prompt cheap). Each candidate adds its logprob to its beam's sum; an
end-of-sequence candidate completes a beam (unless `ignore_eos`), and the beam_width best others go on. After
max_tokens steps, or when no beam is left, the completed and live beams are ranked by sum / generated tokens **
length_penalty (as Transformers ranks them) and the best beam_width are the choices, a live one finishing with
"length". As in vLLM, beam_width is the request's `n`, and of the sampling fields only temperature, ignore_eos,
include_stop_str_in_output and skip_special_tokens apply; stop strings, penalties and constraints do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.outputs import CompletionOutput, Logprob, RequestOutput
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import EngineRequest, RequestTracker
from kvtool.engine.sizing import messages


@dataclass
class BeamSearchParams:
    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 1.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True


def check_beam_search(body, streams: bool = True) -> None:
    """What a beam search cannot do: stream on /v1/completions (vLLM's refusal), or an allowlist (kvtool's)."""
    if not body.use_beam_search:
        return
    if body.stream and not streams:
        raise APIError(messages.STREAMED_BEAM_SEARCH)
    if body.allowed_token_ids is not None:
        raise APIError(messages.ALLOWED_TOKEN_IDS_WITH_BEAM_SEARCH, param="allowed_token_ids")


def beam_search_params(body, max_tokens: int) -> BeamSearchParams:
    """A completions or chat body's beam search (vLLM's to_beam_search_params); temperature defaults to 1."""
    return BeamSearchParams(
        beam_width=body.n,
        max_tokens=max_tokens,
        ignore_eos=body.ignore_eos,
        temperature=1.0 if body.temperature is None else body.temperature,
        length_penalty=body.length_penalty,
        include_stop_str_in_output=body.include_stop_str_in_output,
        skip_special_tokens=body.skip_special_tokens,
    )


@dataclass
class Beam:
    tokens: list[int]  # the prompt's, then the generated ones
    logprobs: list[dict[int, Logprob]] = field(default_factory=list)  # one per generated token, EOS included
    cum_logprob: float = 0.0
    finish_reason: str | None = None
    stop_reason: int | None = None

    def score(self, length_penalty: float) -> float:
        return self.cum_logprob / max(len(self.logprobs), 1) ** length_penalty


class BeamSearch:
    """One prompt's beam search; `run()` returns its RequestOutput, the best beam_width beams as its outputs."""

    def __init__(self, state, request: EngineRequest, params: BeamSearchParams):
        self.state, self.request, self.params = state, request, params
        self.prompt_ids = request.processed.prompt_token_ids
        self.eos = state.engine.input_processor.stop_token_ids
        self.step_params = SamplingParams(logprobs=2 * params.beam_width, max_tokens=1, temperature=params.temperature)

    async def run(self) -> RequestOutput:
        beams, completed = [Beam(list(self.prompt_ids))], []
        for _ in range(self.params.max_tokens):
            beams = await self.step(beams, completed)
            if not beams or beams[0].finish_reason == "abort":
                break
        best = sorted(completed + beams, key=lambda beam: -beam.score(self.params.length_penalty))
        outputs = [self.output(i, beam) for i, beam in enumerate(best[: self.params.beam_width])]
        return RequestOutput(self.request.request_id, self.request.processed.prompt, self.prompt_ids, outputs, True)

    async def step(self, beams: list[Beam], completed: list[Beam]) -> list[Beam]:
        """The beam_width best one-token extensions of the live beams (the beams themselves, aborted, on an abort)."""
        step_id = f"{self.request.request_id}-{uuid.uuid4().hex}"
        steps = await asyncio.gather(*(self.next_token(beam, f"{step_id}-beam-{i}") for i, beam in enumerate(beams)))
        if any(step.outputs[0].finish_reason == "abort" for step in steps):
            for beam in beams:
                beam.finish_reason = "abort"
            return beams
        candidates = [
            c for beam, step in zip(beams, steps) for c in self.extend(beam, step.outputs[0].logprobs[0], completed)
        ]
        candidates.sort(key=lambda candidate: -candidate.cum_logprob)
        return candidates[: self.params.beam_width]

    def extend(self, beam: Beam, step_logprobs: dict[int, Logprob], completed: list[Beam]) -> list[Beam]:
        """The beam extended by each candidate token; one that ends the sequence goes to `completed` instead."""
        extended = []
        for token_id, logprob in step_logprobs.items():
            cum_logprob, logprobs = beam.cum_logprob + logprob.logprob, [*beam.logprobs, step_logprobs]
            if token_id in self.eos and not self.params.ignore_eos:
                tokens = beam.tokens + [token_id] if self.params.include_stop_str_in_output else beam.tokens
                completed.append(Beam(tokens, logprobs, cum_logprob, "stop", token_id))
            else:
                extended.append(Beam(beam.tokens + [token_id], logprobs, cum_logprob))
        return extended

    async def next_token(self, beam: Beam, request_id: str) -> RequestOutput:
        """One engine request for the beam's next token, counted in the server metrics like any other."""
        processed = self.state.engine.input_processor.process(beam.tokens, self.step_params)
        tracker = RequestTracker(self.state.metrics, EngineRequest(self.request.prompt_index, processed, request_id, 1))
        self.state.active_request_ids.add(request_id)
        try:
            async with contextlib.aclosing(self.state.engine.generate(processed, None, request_id)) as stream:
                async for output in stream:
                    tracker.on_output(output)
            return output
        finally:
            self.state.active_request_ids.discard(request_id)
            tracker.on_end()

    def output(self, index: int, beam: Beam) -> CompletionOutput:
        token_ids = beam.tokens[len(self.prompt_ids) :]
        shown = token_ids[:-1] if token_ids and token_ids[-1] in self.eos and not self.params.ignore_eos else token_ids
        text = self.state.engine.tokenizer.decode(shown, skip_special_tokens=self.params.skip_special_tokens)
        return CompletionOutput(
            index,
            text,
            token_ids,
            beam.logprobs,
            beam.finish_reason or "length",
            beam.stop_reason,
            delta_text=text,  # a stream of a beam search is one chunk per choice, the whole of it
            delta_token_ids=token_ids,
            delta_logprobs=beam.logprobs,
        )


async def beam_search_outputs(
    state, requests: list[EngineRequest], params_for
) -> AsyncIterator[tuple[EngineRequest, RequestOutput]]:
    """Each prompt's beam search (`params_for(request)`), side by side; (request, its output) as each finishes.
    Closing this (a client that left) cancels the searches, and with them their engine requests."""
    searches = [asyncio.ensure_future(_search(state, request, params_for(request))) for request in requests]
    try:
        for finished in asyncio.as_completed(searches):
            yield await finished
    finally:
        with anyio.CancelScope(shield=True):  # a client that went away cancels us; the cleanup must still run
            for task in searches:
                task.cancel()
            await asyncio.gather(*searches, return_exceptions=True)


async def _search(state, request: EngineRequest, params: BeamSearchParams) -> tuple[EngineRequest, RequestOutput]:
    return request, await BeamSearch(state, request, params).run()


async def beam_search_finals(state, requests: list[EngineRequest], params_for) -> dict[int, RequestOutput]:
    """The output of every prompt's beam search, by prompt index."""
    async with contextlib.aclosing(beam_search_outputs(state, requests, params_for)) as outputs:
        return {request.prompt_index: output async for request, output in outputs}
