"""AsyncLLM: the engine behind an asyncio front, for the server.

A background task runs engine steps in a worker thread (so the event loop stays free for HTTP)
and routes each RequestOutput to its request's queue. Closing a request's stream early aborts it.
"""

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from kvtool.engine.runtime.config import EngineConfig, SamplingParams
from kvtool.engine.runtime.core.scheduler import SchedulerStats
from kvtool.engine.runtime.exceptions import EngineDeadError, EngineGenerateError
from kvtool.engine.runtime.input_processor import InputProcessor, ProcessedRequest
from kvtool.engine.runtime.llm_engine import LLMEngine
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.errors import KvtoolError, UsageError

logger = logging.getLogger("kvtool.engine")


class AsyncLLM:
    def __init__(self, engine: LLMEngine, step_thread: ThreadPoolExecutor | None = None):
        self.engine = engine
        self._lock = threading.Lock()  # engine state is touched by the loop and the step thread
        self._aborts: list[str] = []  # applied by the step thread, so aborting never blocks the loop
        self._queues: dict[str, asyncio.Queue] = {}
        self._wakeup: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._stopped = False
        self.dead_error: EngineDeadError | None = None  # set when a step failed in a way nothing survives
        self._step_thread = step_thread or _new_step_thread()

    @classmethod
    def from_config(cls, config: EngineConfig) -> "AsyncLLM":
        """Load the model and size the KV cache; KVCacheTooSmallError when max_model_len does not fit.

        Loading runs on the thread that will run the steps: every thread that runs torch ops gets
        its own OpenMP worker team, and once there are more team threads than cores, OpenMP stops
        spinning between parallel regions, which made each step on 2 cores about 60 % slower.
        """
        step_thread = _new_step_thread()
        return cls(step_thread.submit(LLMEngine, config).result(), step_thread)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def model_name(self) -> str:
        return self.engine.model_name

    @property
    def config(self) -> EngineConfig:
        return self.engine.config

    def add_step_listener(self, listener) -> None:
        """`listener(num_tokens)` after every engine step (it runs on the step thread)."""
        self.engine.step_listeners.append(listener)

    @property
    def grammar_compiler(self):
        return self.engine.grammar_compiler

    @property
    def kv_cache_info(self):
        return self.engine.kv_cache_info

    @property
    def input_processor(self) -> InputProcessor:
        return self.engine.input_processor

    @property
    def errored(self) -> bool:
        return self.dead_error is not None

    def check_health(self) -> None:
        if self.dead_error is not None:
            raise self.dead_error

    async def generate(
        self, prompt: str | list[int] | ProcessedRequest, params: SamplingParams | None, request_id: str
    ) -> AsyncIterator[RequestOutput]:
        """Stream the request's outputs; a 400-type KvtoolError before the first one when it cannot run.

        EngineGenerateError when the request fails inside a step, EngineDeadError when the engine died.
        """
        self.check_health()
        if request_id in self._queues:
            raise UsageError(f"Request id {request_id!r} is already running.", fix="Use a unique request id.")
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[request_id] = queue  # before the add, so that no output can arrive unrouted
        finished = rejected = False
        try:
            # The step thread holds the lock for a whole step: wait for it off the event loop.
            await asyncio.to_thread(self._add_request, request_id, prompt, params)
        except KvtoolError:
            rejected = True
            raise
        finally:
            if rejected:
                self._queues.pop(request_id, None)
        try:
            self._start_loop()
            while not finished:
                output = await queue.get()
                if isinstance(output, BaseException):
                    raise output
                finished = output.finished
                if output.error is not None:
                    raise EngineGenerateError(output.error)
                yield output
        finally:
            self._queues.pop(request_id, None)
            if not finished:
                self._request_abort(request_id)

    async def abort(self, request_id: str) -> None:
        """Stop the request and free its blocks (before the next step); its stream ends with "abort"."""
        self._request_abort(request_id)

    def stats(self) -> SchedulerStats:
        """A snapshot of counters; read without the lock so that a scrape never waits for a step."""
        return self.engine.stats()

    async def shutdown(self) -> None:
        """Abort what is still running and stop the step loop."""
        with self._lock:
            request_ids = list(self.engine.seqs_by_request)
        for request_id in request_ids:
            self._route(self._abort_now(request_id))
        self._stopped = True
        if self._wakeup is not None:
            self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        self._step_thread.shutdown(wait=False)

    def _add_request(self, request_id: str, prompt, params: SamplingParams | None) -> None:
        with self._lock:
            self.engine.add_request(request_id, prompt, params)

    def _abort_now(self, request_id: str) -> RequestOutput | None:
        with self._lock:
            return self.engine.abort_request(request_id)

    def _request_abort(self, request_id: str) -> None:
        self._aborts.append(request_id)
        if self._wakeup is not None:
            self._wakeup.set()

    def _route(self, output: RequestOutput | None) -> None:
        queue = self._queues.get(output.request_id) if output is not None else None
        if queue is not None:
            queue.put_nowait(output)

    def _start_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._wakeup = asyncio.Event()
            self._loop_task = asyncio.get_running_loop().create_task(self._run())
        self._wakeup.set()

    async def _run(self) -> None:
        while not self._stopped:
            if not self.engine.has_unfinished_requests() and not self._aborts:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                outputs = await asyncio.get_running_loop().run_in_executor(self._step_thread, self._step)
            except Exception as err:  # the engine broke: every waiting stream gets the error
                self._die(err)
                return
            for output in outputs:
                self._route(output)

    def _step(self) -> list[RequestOutput]:
        with self._lock:
            aborts, self._aborts = self._aborts, []
            aborted = [self.engine.abort_request(request_id) for request_id in aborts]
            return [output for output in aborted if output is not None] + self.engine.step()

    def _die(self, err: Exception) -> None:
        logger.error("The engine is dead; every request in flight fails", exc_info=err)
        self.dead_error = err if isinstance(err, EngineDeadError) else EngineDeadError(f"{type(err).__name__}: {err}")
        for queue in list(self._queues.values()):
            queue.put_nowait(self.dead_error)


def _new_step_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvtool-step")
