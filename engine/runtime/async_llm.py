"""AsyncLLM: the engine behind an asyncio front, for the server.

A background task runs engine steps in a worker thread (so the event loop stays free for HTTP)
and routes each RequestOutput to its request's queue. Adds and aborts reach the engine as vLLM's
engine core takes them: one FIFO of ADD and ABORT requests, drained in order by the step thread at
the start of each step, so an abort can never overtake its request's add, and only the step thread
changes the engine. Closing a request's stream early, or cancelling it at any point, aborts it.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum, auto
from queue import SimpleQueue

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.core.scheduler import SchedulerStats
from kvtool.engine.runtime.exceptions import EngineDeadError, EngineGenerateError
from kvtool.engine.runtime.input_processor import InputProcessor, ProcessedRequest
from kvtool.engine.runtime.llm_engine import LLMEngine
from kvtool.engine.runtime.outputs import RequestOutput
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.errors import UsageError

logger = logging.getLogger("kvtool.engine")


class EngineCoreRequestType(Enum):
    ADD = auto()
    ABORT = auto()


@dataclass
class EngineCoreRequest:
    """A request to add; `added` resolves when the step thread took it (or refused it with a KvtoolError)."""

    request_id: str
    prompt: str | list[int] | ProcessedRequest
    params: SamplingParams | None
    added: Future


class AsyncLLM:
    def __init__(self, engine: LLMEngine, step_thread: ThreadPoolExecutor | None = None):
        self.engine = engine  # changed only by the step thread, once loaded
        self.input_queue: SimpleQueue[tuple[EngineCoreRequestType, object]] = SimpleQueue()
        self._queues: dict[str, asyncio.Queue] = {}
        self._wakeup: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._stopped = False
        self.dead_error: EngineDeadError | None = None  # set when a step failed in a way nothing survives
        self._step_thread = step_thread or _new_step_thread()

    @classmethod
    def from_engine_args(cls, args: EngineArgs) -> "AsyncLLM":
        """Load the model and size the KV cache; KVCacheTooSmallError when max_model_len does not fit.

        Loading runs on the thread that will run the steps: every thread that runs torch ops gets
        its own OpenMP worker team, and once there are more team threads than cores, OpenMP stops
        spinning between parallel regions, which made each step on 2 cores about 60 % slower.
        """
        step_thread = _new_step_thread()
        return cls(step_thread.submit(LLMEngine, args).result(), step_thread)

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
        finished = False
        try:
            added: Future = Future()
            self._send(EngineCoreRequestType.ADD, EngineCoreRequest(request_id, prompt, params, added))
            await asyncio.wrap_future(added)
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
            if not finished:  # cancelled, closed early or refused: the ABORT follows the ADD in the queue
                self._send(EngineCoreRequestType.ABORT, request_id)

    async def abort(self, request_id: str) -> None:
        """Stop the request and free its blocks (before the next step); its stream ends with "abort"."""
        self._send(EngineCoreRequestType.ABORT, request_id)

    def stats(self) -> SchedulerStats:
        """A snapshot of counters, read while a step may run, so that a scrape never waits for one."""
        return self.engine.stats()

    async def shutdown(self) -> None:
        """Stop the step loop after its step, then abort what is still queued or running."""
        self._stopped = True
        if self._wakeup is not None:
            self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        for output in await asyncio.get_running_loop().run_in_executor(self._step_thread, self._abort_all):
            self._route(output)
        self._step_thread.shutdown(wait=False)

    def _send(self, request_type: EngineCoreRequestType, request) -> None:
        self.input_queue.put_nowait((request_type, request))
        self._start_loop()

    def _route(self, output: RequestOutput | None) -> None:
        queue = self._queues.get(output.request_id) if output is not None else None
        if queue is not None:
            queue.put_nowait(output)

    def _start_loop(self) -> None:
        if self.dead_error is not None:
            return  # a dead engine never steps again
        if self._loop_task is None or self._loop_task.done():
            self._wakeup = asyncio.Event()
            self._loop_task = asyncio.get_running_loop().create_task(self._run())
        self._wakeup.set()

    async def _run(self) -> None:
        while not self._stopped:
            if self.input_queue.empty() and not self.engine.has_unfinished_requests():
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
        outputs = self._process_input_queue()
        if self.engine.has_unfinished_requests():
            outputs += self.engine.step()
        return outputs

    def _take_input(self):
        """The ADDs and ABORTs sent so far, in the order they were sent."""
        while not self.input_queue.empty():
            yield self.input_queue.get_nowait()

    def _process_input_queue(self) -> list[RequestOutput]:
        """Apply what was sent since the last step; returns the outputs of the requests it aborted."""
        outputs = []
        for request_type, request in self._take_input():
            if request_type is EngineCoreRequestType.ADD:
                self._add_request(request)
            elif (output := self.engine.abort_request(request)) is not None:
                outputs.append(output)
        return outputs

    def _add_request(self, request: EngineCoreRequest) -> None:
        if not request.added.set_running_or_notify_cancel():
            return  # its caller left before the step thread got to it: nothing to add
        try:
            self.engine.add_request(request.request_id, request.prompt, request.params)
        except Exception as err:  # refused (a KvtoolError): its caller raises it and the engine goes on
            request.added.set_exception(err)
        else:
            request.added.set_result(None)

    def _abort_all(self) -> list[RequestOutput]:
        outputs = self._process_input_queue()
        aborted = [self.engine.abort_request(request_id) for request_id in list(self.engine.seqs_by_request)]
        return outputs + [output for output in aborted if output is not None]

    def _die(self, err: Exception) -> None:
        logger.error("The engine is dead; every request in flight fails", exc_info=err)
        self.dead_error = err if isinstance(err, EngineDeadError) else EngineDeadError(f"{type(err).__name__}: {err}")
        for queue in list(self._queues.values()):
            queue.put_nowait(self.dead_error)
        for request_type, request in self._take_input():  # adds the step thread will never take
            if request_type is EngineCoreRequestType.ADD and request.added.set_running_or_notify_cancel():
                request.added.set_exception(self.dead_error)


def _new_step_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvtool-step")
