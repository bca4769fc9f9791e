"""LLMEngine: requests in, one scheduled model step at a time, RequestOutputs out."""

import logging
import time

from kvtool.engine.runtime import startup
from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.core.block_manager import BlockManager
from kvtool.engine.runtime.core.scheduler import Scheduler, SchedulerOutput, SchedulerStats
from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.exceptions import EngineDeadError, is_engine_fatal
from kvtool.engine.runtime.input_processor import InputProcessor, ProcessedRequest
from kvtool.engine.runtime.output_processor import OutputProcessor
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt, EmbedsShape
from kvtool.engine.runtime.tokenizer import eos_token_ids, load_tokenizer
from kvtool.engine.runtime.worker.loader import load_hf_config, resolve_model_source, resolve_quantization, torch_dtype
from kvtool.engine.runtime.worker.model_runner import ModelRunner, ModelRunnerOutput
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.kv_cache import KVCachePlan
from kvtool.engine.sizing.messages import REQUEST_FAILED_IN_STEP
from kvtool.errors import UsageError

logger = logging.getLogger("kvtool.engine")


class LLMEngine:
    def __init__(self, args: EngineArgs):
        args.check_for_engine()
        source = resolve_model_source(args.model_name)
        hf_config = load_hf_config(source.folder)
        self.model_name = source.name
        self.tokenizer = load_tokenizer(source.folder)
        self.device = startup.resolve_device(args.device)
        quantization = resolve_quantization(args, source, self.device)
        dtype = torch_dtype(args.dtype, hf_config, self.device, quantization)
        self.spec = startup.engine_spec(hf_config, source.name, dtype)
        self.config = startup.create_engine_config(args, self.spec, self.device, quantization)
        eos = eos_token_ids(self.tokenizer, hf_config)
        self.model_runner = ModelRunner(self.config, hf_config, source, self.device, dtype, eos)
        self.kv_cache_info = self._initialize_kv_cache()
        block_manager = BlockManager(
            self.config.cache_config,
            self.model_runner.num_pool_blocks(self.kv_cache_info.num_blocks),
            self.model_runner.kv_cache_layout.sliding_windows,
        )
        self.scheduler = Scheduler(self.config, block_manager, eos)
        model_config = self.config.model_config
        embeds = EmbedsShape(hf_config.hidden_size, dtype) if model_config.enable_prompt_embeds else None
        self.input_processor = InputProcessor(
            self.tokenizer, self.spec.vocab_size, model_config, stop_token_ids=eos, embeds_shape=embeds
        )
        self.output_processor = OutputProcessor(self.tokenizer)
        self.seqs_by_request: dict[str, list[Sequence]] = {}
        self.step_listeners: list = []  # called with the tokens of each step: prefilled, plus sampled (as vLLM)
        logger.info(self.kv_cache_info.log_line("GPU" if self.device.type == "cuda" else "CPU"))

    def _initialize_kv_cache(self) -> KVCachePlan:
        """Size the KV cache from the memory the model left (vLLM's start-up check, then the plan) and allocate it."""
        config, runner = self.config, self.model_runner
        plan = startup.plan_kv_cache(config, self.spec, runner.available_kv_bytes())
        runner.allocate_kv_cache(plan.num_blocks)
        return plan

    def add_request(
        self,
        request_id: str,
        prompt: str | list[int] | EmbedsPrompt | ProcessedRequest,
        params: SamplingParams | None = None,
    ) -> None:
        """Queue a request: a prompt (processed here) or one the InputProcessor already checked.

        RequestTooLongError / InvalidRequestError (vLLM's wording) when it cannot run.
        """
        if request_id in self.seqs_by_request:
            raise UsageError(f"Request id {request_id!r} is already running.", fix="Use a unique request id.")
        request = prompt if isinstance(prompt, ProcessedRequest) else self.input_processor.process(prompt, params)
        params = request.params
        seqs = [
            Sequence(
                request_id,
                request.prompt_token_ids,
                params,
                request.max_tokens.value,
                i,
                request.arrival_time,
                request.prompt_embeds,
            )
            for i in range(params.n)
        ]
        if params.structured_outputs is not None:
            for seq in seqs:
                seq.grammar = self.input_processor.grammar_compiler.matcher(params.structured_outputs)
        self.seqs_by_request[request_id] = seqs
        self.output_processor.add_request(request_id, request.prompt, request.prompt_token_ids, seqs)
        for seq in seqs:
            self.scheduler.add(seq)

    def abort_request(self, request_id: str) -> RequestOutput | None:
        """Stop a request and free its blocks; returns its final output (finish_reason "abort")."""
        seqs = self.seqs_by_request.pop(request_id, None)
        if seqs is None:
            return None
        for seq in seqs:
            self.scheduler.finish(seq, "abort")
        return self.output_processor.abort(request_id)

    def step(self) -> list[RequestOutput]:
        """One scheduled step; a request whose inputs make it raise is failed alone (finish_reason "error").

        EngineDeadError when the failure leaves the engine unusable (out of memory, a device error).
        """
        scheduled = self.scheduler.schedule()
        if not scheduled.seqs:
            return []
        self._mark_scheduled(scheduled.seqs)
        result, failed = self._execute(scheduled)
        outputs = [self._fail_request(request_id, err) for request_id, err in failed.items()]
        num_tokens = _iteration_tokens(scheduled, len(result.sampled))
        for listener in self.step_listeners:
            listener(num_tokens)
        updated = self.scheduler.update_from_output(scheduled, result.sampled)
        self.output_processor.add_prompt_logprobs(result.prompt_logprobs)
        outputs += self.output_processor.process(updated, result.logprobs, self.scheduler.finish)
        for output in outputs:
            if output.finished:
                self.seqs_by_request.pop(output.request_id, None)
        return outputs

    def _execute(self, scheduled: SchedulerOutput) -> tuple[ModelRunnerOutput, dict[str, Exception]]:
        try:
            return self.model_runner.execute(scheduled), {}
        except Exception as err:
            if is_engine_fatal(err):
                raise EngineDeadError(f"The engine step failed: {type(err).__name__}: {err}") from err
            logger.warning(
                "A step of %d sequences raised %s; running them one by one to find the cause",
                len(scheduled.seqs),
                type(err).__name__,
            )
            return self._execute_one_by_one(scheduled)

    def _execute_one_by_one(self, scheduled: SchedulerOutput) -> tuple[ModelRunnerOutput, dict[str, Exception]]:
        """Re-run each sequence of a failed step alone: a KV write repeats the same values into the same slots."""
        merged, failed = ModelRunnerOutput({}, {}, {}), {}
        for seq, num_new in zip(scheduled.seqs, scheduled.num_new_tokens):
            try:
                result = self.model_runner.execute(SchedulerOutput([seq], [num_new], int(num_new == 1)))
            except Exception as err:
                if is_engine_fatal(err):
                    raise EngineDeadError(f"The engine step failed: {type(err).__name__}: {err}") from err
                failed.setdefault(seq.request_id, err)
                continue
            merged.sampled.update(result.sampled)
            merged.logprobs.update(result.logprobs)
            merged.prompt_logprobs.update(result.prompt_logprobs)
        return merged, failed

    def _fail_request(self, request_id: str, err: Exception) -> RequestOutput:
        logger.error("Request %s failed inside the engine step", request_id, exc_info=err)
        for seq in self.seqs_by_request.get(request_id, []):
            self.scheduler.finish(seq, "error")
        output = self.output_processor.abort(request_id)
        output.error = REQUEST_FAILED_IN_STEP.format(request_id=request_id, error=f"{type(err).__name__}: {err}")
        return output

    @property
    def grammar_compiler(self):
        return self.input_processor.grammar_compiler

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def stats(self) -> SchedulerStats:
        return self.scheduler.stats()

    def _mark_scheduled(self, seqs: list[Sequence]) -> None:
        now = time.monotonic()
        for seq in seqs:
            state = self.output_processor.requests.get(seq.request_id)
            if state is not None and state.metrics.first_scheduled_time is None:
                state.metrics.first_scheduled_time = now


def _iteration_tokens(scheduled: SchedulerOutput, num_sampled: int) -> int:
    """A step's tokens as vLLM's iteration_tokens_total counts them: the prompt tokens it prefilled (before the
    scheduler counts them computed), plus every token it sampled, the first token of a prefill included."""
    prefilled = sum(n for seq, n in zip(scheduled.seqs, scheduled.num_new_tokens) if not seq.num_output_tokens)
    return prefilled + num_sampled
