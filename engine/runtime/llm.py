"""The offline API: LLM(model=...).generate(prompts, SamplingParams(...)), as in vLLM."""

import itertools
from collections.abc import Sequence

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm_engine import LLMEngine
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt
from kvtool.engine.sizing.engine_args import EngineArgs

Prompt = str | list[int] | EmbedsPrompt  # an EmbedsPrompt needs enable_prompt_embeds=True


class LLM:
    """An engine in this process. Keyword arguments are EngineArgs fields (dtype, max_model_len, ...)."""

    def __init__(self, model: str = "smollm2", **kwargs):
        self.engine = LLMEngine(EngineArgs.from_kwargs(model=model, **kwargs))
        self._ids = itertools.count()

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    def generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        sampling_params: SamplingParams | list | None = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        """Run every prompt to completion; outputs come back in prompt order.

        Without sampling_params each request gets SamplingParams(), whose max_tokens is 16.
        """
        prompts = _as_prompt_list(prompts)
        params = _as_params_list(sampling_params, len(prompts))
        request_ids = [str(next(self._ids)) for _ in prompts]
        try:
            for request_id, prompt, param in zip(request_ids, prompts, params):
                self.engine.add_request(request_id, prompt, param)
        except Exception:  # one bad prompt: none of this call's requests stay queued
            for request_id in request_ids:
                self.engine.abort_request(request_id)
            raise
        finished = self._run(len(prompts), use_tqdm)
        return [finished[request_id] for request_id in request_ids]

    def _run(self, total: int, use_tqdm: bool) -> dict[str, RequestOutput]:
        from kvtool.engine.runtime.progress import GenerationProgress

        finished: dict[str, RequestOutput] = {}
        with GenerationProgress(total, enabled=use_tqdm) as progress:
            while self.engine.has_unfinished_requests():
                outputs = self.engine.step()
                done = [o for o in outputs if o.finished]
                finished.update((o.request_id, o) for o in done)
                progress.advance(done, sum(len(c.delta_token_ids) for o in outputs for c in o.outputs))
        return finished


def _as_prompt_list(prompts) -> list[Prompt]:
    if isinstance(prompts, (str, EmbedsPrompt)):
        return [prompts]
    prompts = list(prompts)
    if prompts and isinstance(prompts[0], int):
        return [prompts]
    return prompts


def _as_params_list(params, count: int) -> list[SamplingParams]:
    if params is None:
        return [SamplingParams()] * count
    if isinstance(params, SamplingParams):
        return [params] * count
    if len(params) != count:
        raise ValueError(f"Got {len(params)} SamplingParams for {count} prompts; give one, or one per prompt.")
    return list(params)
