"""LLMEngine: requests in, one scheduled model step at a time, RequestOutputs out."""

import dataclasses
import logging
import threading
import time

from kvtool.engine.runtime import startup
from kvtool.engine.runtime.config import EngineConfig, SamplingParams
from kvtool.engine.runtime.core.block_manager import BlockManager
from kvtool.engine.runtime.core.scheduler import Scheduler, SchedulerStats
from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.output_processor import OutputProcessor
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.engine.runtime.tokenizer import eos_token_ids, load_tokenizer
from kvtool.engine.runtime.worker.loader import load_hf_config, resolve_model_source, torch_dtype
from kvtool.engine.runtime.worker.model_runner import ModelRunner
from kvtool.engine.sizing.kv_cache import check_request_length
from kvtool.errors import UsageError

logger = logging.getLogger("kvtool.engine")


class LLMEngine:
    def __init__(self, config: EngineConfig):
        source = resolve_model_source(config.model)
        hf_config = load_hf_config(source.folder)
        self.model_name = source.name
        self.tokenizer = load_tokenizer(source.folder)
        self.device = startup.resolve_device(config.device)
        dtype = torch_dtype(config.dtype, hf_config, self.device)
        self.spec = startup.engine_spec(hf_config, source.name, dtype)
        max_model_len = startup.resolve_max_model_len(config, self.spec)
        batched_tokens, max_seqs = startup.resolve_scheduler_limits(config, max_model_len, self.device)
        self.config = dataclasses.replace(config, max_model_len=max_model_len,
                                          max_num_batched_tokens=batched_tokens, max_num_seqs=max_seqs)
        eos = eos_token_ids(self.tokenizer, hf_config)
        self.eos_token_ids = eos
        self._grammar_compiler = None
        self._grammar_lock = threading.Lock()  # the server and the step thread may both ask first
        self.model_runner = ModelRunner(self.config, hf_config, source, self.device, dtype, max_model_len, eos)
        self.kv_cache_info = startup.plan_kv_cache(self.config, self.spec, self.model_runner.available_kv_bytes(),
                                                   max_model_len, batched_tokens)
        self.model_runner.allocate_kv_cache(self.kv_cache_info.num_blocks)
        block_manager = BlockManager(self.kv_cache_info.num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(block_manager, max_seqs, batched_tokens, max_model_len,
                                   config.enable_chunked_prefill, eos)
        self.output_processor = OutputProcessor(self.tokenizer)
        self.seqs_by_request: dict[str, list[Sequence]] = {}
        self.step_listeners: list = []  # called with the number of tokens each step ran
        logger.info(self.kv_cache_info.log_line("GPU" if self.device.type == "cuda" else "CPU"))

    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams,
                    arrival_time: float | None = None) -> None:
        """Queue a request; RequestTooLongError (vLLM's wording) when it cannot fit max_model_len."""
        if request_id in self.seqs_by_request:
            raise UsageError(f"Request id {request_id!r} is already running.", fix="Use a unique request id.")
        prompt_text, prompt_ids = self._tokenize(prompt)
        max_tokens = check_request_length(len(prompt_ids), params.max_tokens, self.config.max_model_len,
                                          self.config.overflow)
        self._prepare_params(params)
        arrival = arrival_time if arrival_time is not None else time.monotonic()
        seqs = [Sequence(request_id, prompt_ids, params, max_tokens, i, arrival) for i in range(params.n)]
        if params.structured_outputs is not None:
            for seq in seqs:
                seq.grammar = self.grammar_compiler.matcher(params.structured_outputs)
        self.seqs_by_request[request_id] = seqs
        self.output_processor.add_request(request_id, prompt_text, prompt_ids, seqs)
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
        scheduled = self.scheduler.schedule()
        if not scheduled.seqs:
            return []
        self._mark_scheduled(scheduled.seqs)
        result = self.model_runner.execute(scheduled)
        for listener in self.step_listeners:
            listener(sum(scheduled.num_new_tokens))
        updated = self.scheduler.update_from_output(scheduled, result.sampled)
        outputs = self.output_processor.process(updated, result.logprobs, self.scheduler.finish)
        for output in outputs:
            if output.finished:
                self.seqs_by_request.pop(output.request_id, None)
        return outputs

    @property
    def grammar_compiler(self):
        """The xgrammar compiler for this tokenizer, built on first use (it reads the whole vocabulary)."""
        with self._grammar_lock:
            if self._grammar_compiler is None:
                from kvtool.engine.runtime.structured_output.compiler import GrammarCompiler
                if self.tokenizer is None:
                    raise UsageError("Structured outputs need a tokenizer; this model folder has none.")
                self._grammar_compiler = GrammarCompiler(self.tokenizer, self.spec.vocab_size, self.eos_token_ids)
            return self._grammar_compiler

    def _prepare_params(self, params: SamplingParams) -> None:
        params.check_token_ids(self.spec.vocab_size)
        if params.bad_words and params.bad_words_token_ids is None:
            from kvtool.engine.runtime.worker.logits_processors import bad_words_token_ids
            try:
                params.bad_words_token_ids = bad_words_token_ids(self.tokenizer, params.bad_words)
            except ValueError as err:
                raise UsageError(str(err)) from err

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

    def _tokenize(self, prompt: str | list[int]) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise UsageError("This model has no tokenizer, so prompts must be token-id lists.",
                                 fix="Pass a list of token ids, or a model folder with tokenizer files.")
            return prompt, self._checked_ids(self.tokenizer.encode(prompt))
        return None, self._checked_ids(list(prompt))

    def _checked_ids(self, ids: list[int]) -> list[int]:
        if not ids:
            raise UsageError("The decoder prompt cannot be empty.", fix="Send at least one token.")
        if not all(isinstance(t, int) and 0 <= t < self.spec.vocab_size for t in ids):
            raise UsageError(f"Prompt token ids must be integers in [0, {self.spec.vocab_size}).")
        return ids
