"""vLLM's V1 scheduler, simulated step by step where the batch changes and in closed form where it does not.

Each step first gives every running request its tokens in admission order (one for a decode, the rest of the
prompt up to the token budget for a prefill), preempting the last admitted request (recompute) while the KV
cache cannot hold the new slots; then, if nothing was preempted, admits waiting requests while the budget,
max_num_seqs and the free blocks allow (v1/core/sched/scheduler.py `schedule`). Between events (an arrival
that could be admitted, a completion, the cache filling up) every step is a decode of the same batch whose
time grows linearly with the context, so the run is summed in one go."""

import heapq
import math
import random
from collections import deque

from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.metrics import RequestRecord, TokenGaps
from kvtool.engine.plan.performance.sim_request import (
    BUDGET,
    KV,
    SEQS,
    Outcome,
    SchedulerLimits,
    SimRequest,
    cdiv,
)
from kvtool.engine.plan.performance.step_time import StepModel, steps_to_reach

DRIFT_SEED = 0


class Simulation:
    def __init__(
        self,
        steps: StepModel,
        limits: SchedulerLimits,
        lengths: list[tuple[int, int]],
        load: Load,
        request_overhead_s: float,
        drift_s: float = 0.0,
    ):
        self.steps, self.limits, self.load, self.overhead = steps, limits, load, request_overhead_s
        self.schedule, self.drift, self.rng = load.schedule(), drift_s, random.Random(DRIFT_SEED)
        self.requests = [SimRequest(RequestRecord(0.0, *pair)) for pair in lengths[: len(self.schedule)]]
        self.outcome = Outcome([r.record for r in self.requests], TokenGaps())
        self.t, self.g, self.sent, self.in_flight, self.done = 0.0, 0, 0, 0, 0
        self.arrivals: list[tuple[float, int, SimRequest]] = []
        self.waiting: deque[SimRequest] = deque()
        self.running: dict[int, SimRequest] = {}  # admission order
        self.prefilling: list[SimRequest] = []
        self.decodes, self.context, self.prefill_blocks = 0, 0, 0
        self.allocated = 0.0  # blocks the pool has handed out so far (prefix caching reuses the oldest freed)
        self.finishing: list[tuple[int, int, int, SimRequest]] = []  # (step, id, version, request)

    def run(self) -> Outcome:
        self.limits.check_servable(max(r.record.input_tokens + r.record.output_tokens for r in self.requests))
        self._release(0.0)
        while self.done < len(self.requests):
            self._take_arrivals()
            if not self.running and not self.waiting:
                self.t = max(self.t, self.arrivals[0][0])
            elif not self.running and not self._admissible(self.waiting[0]):
                raise self.limits.unservable(self._head_tokens())  # nothing running will free a block for it
            elif (steps := self._quiet_steps()) > 0:
                self._decode_run(steps)
            else:
                self._step()
        return self.outcome

    # -- clients ------------------------------------------------------------------------------------------
    def _release(self, now: float) -> None:
        """Send requests while the clients' concurrency allows (vllm bench serve's semaphore)."""
        cap = self.load.max_concurrency or len(self.requests)
        while self.in_flight < cap and self.sent < len(self.requests):
            request = self.requests[self.sent]
            request.record.sent = max(self.schedule[self.sent], now) + self._drift(cap)
            heapq.heappush(self.arrivals, (request.record.sent + self.overhead, self.sent, request))
            self.sent += 1
            self.in_flight += 1

    def _drift(self, clients: int) -> float:
        """A closed loop starts with every client at once; from then on the clients drift apart (jitter in the
        client, the network and the server), which a long run sees as clients at random phases: each client's
        second request waits a random share of `drift` (one request's latency), once."""
        return self.rng.uniform(0.0, self.drift) if clients <= self.sent < 2 * clients else 0.0

    def _head_tokens(self) -> int:
        head = self.waiting[0]
        return head.record.input_tokens + head.record.output_tokens

    def _take_arrivals(self) -> None:
        while self.arrivals and self.arrivals[0][0] <= self.t:
            self.waiting.append(heapq.heappop(self.arrivals)[2])

    # -- KV blocks ----------------------------------------------------------------------------------------
    def _decode_blocks(self, tokens: int, decodes: int) -> int:
        """Blocks of `decodes` requests holding `tokens` in all: each rounds up, half a block on average."""
        size = self.limits.block_size
        return math.ceil(tokens / size + decodes * (size - 1) / (2 * size)) if decodes else 0

    def _free_blocks(self) -> int:
        """Blocks left once every decode has its next slot."""
        used = self._decode_blocks(self.context + self.decodes, self.decodes) + self.prefill_blocks
        return self.limits.num_blocks - used

    def _blocks(self, tokens: int) -> int:
        return cdiv(tokens, self.limits.block_size)

    # -- decode runs --------------------------------------------------------------------------------------
    def _quiet_steps(self) -> int:
        """How many decode-only steps run before anything changes the batch (0: step one by one)."""
        if self.prefilling or not self.decodes or (self.waiting and self._admissible(self.waiting[0])):
            return 0
        self._drop_stale()
        steps = self.finishing[0][0] - self.g
        room = (self.limits.num_blocks - self.prefill_blocks) * self.limits.block_size - self.context
        room -= self.decodes * (self.limits.block_size - 1) / 2
        steps = min(steps, int(room // self.decodes))
        if not self.waiting and len(self.running) < self.limits.max_num_seqs and self.arrivals:
            steps = min(steps, self._steps_until(self.arrivals[0][0]))
        return steps

    def _admissible(self, request: SimRequest) -> bool:
        budget = self.limits.max_num_batched_tokens - self.decodes
        if len(self.running) >= self.limits.max_num_seqs or budget <= 0:
            return False
        cached = self._still_cached(request)
        return self._free_blocks() >= self._blocks(cached + min(request.target - cached, budget))

    def _still_cached(self, request: SimRequest) -> int:
        """Tokens of a preempted request whose blocks prefix caching still holds: freed blocks are reused oldest
        first and a request's own from its tail, so its prefix survives until the pool has handed out as many
        blocks as it held (v1/core/block_pool.py free_blocks, kv_cache_manager.get_computed_blocks)."""
        if not request.held:
            return 0
        reused = int(self.allocated - request.evicted_at) * self.limits.block_size
        cached = max(0, request.held - reused)
        return min(cached - cached % self.limits.block_size, request.target - 1)

    def _steps_until(self, when: float) -> int:
        first, growth = self.steps.decode_run(self.decodes, self.context)
        return steps_to_reach(first.seconds, growth, when - self.t)

    def _decode_run(self, k: int) -> None:
        first, growth = self.steps.decode_run(self.decodes, self.context)
        seconds = k * first.seconds + growth * k * (k - 1) / 2
        self.outcome.gaps.add(first.seconds, growth, k, self.decodes)
        self._account(seconds, k * first.compute_seconds, self._holdup())
        self.g += k
        self.context += k * self.decodes
        self.allocated += k * self.decodes / self.limits.block_size
        self._finish_due()

    # -- one step -----------------------------------------------------------------------------------------
    def _step(self) -> None:
        preempted = False
        while self.decodes and self._free_blocks() < 0:
            preempted = self._preempt_last()
        budget = self.limits.max_num_batched_tokens - self.decodes
        chunks: list[tuple[SimRequest, int]] = []
        for request in list(self.prefilling):
            new = min(request.target - request.computed, budget)
            need = self._blocks(request.computed + new) - self._blocks(request.computed)
            while request in self.prefilling and self._free_blocks() < need:
                preempted = self._preempt_last()
            if request not in self.prefilling or new <= 0:
                break
            self.prefill_blocks += need
            self.allocated += need
            chunks.append((request, new))
            budget -= new
        if not preempted:
            budget = self._admit(budget, chunks)
        self._run_step(chunks, self._holdup(preempted, budget))

    def _admit(self, budget: int, chunks: list) -> int:
        while self.waiting and budget > 0 and len(self.running) < self.limits.max_num_seqs:
            request = self.waiting[0]
            cached = self._still_cached(request)
            new = min(request.target - cached, budget)
            need = self._blocks(cached + new)
            if self._free_blocks() < need:
                break
            request.computed = cached
            self.allocated += need
            self.waiting.popleft()
            self.running[id(request)] = request
            self.prefilling.append(request)
            self.prefill_blocks += need
            chunks.append((request, new))
            budget -= new
        return budget

    def _holdup(self, preempted: bool = False, budget: int = 1) -> str | None:
        """What keeps the head of the queue waiting this step (for `bound`)."""
        if not self.waiting:
            return None
        if len(self.running) >= self.limits.max_num_seqs:
            return SEQS
        return BUDGET if budget <= 0 and not preempted else KV

    def _run_step(self, chunks: list[tuple[SimRequest, int]], holdup: str | None) -> None:
        took = self.steps.step(self.decodes, self.context, [(new, r.computed) for r, new in chunks])
        self.outcome.gaps.add(took.seconds, 0.0, 1, self.decodes)
        self._account(took.seconds, took.compute_seconds, holdup)
        self.g += 1
        self.context += self.decodes
        self.allocated += self.decodes / self.limits.block_size
        for request, new in chunks:
            request.computed += new
            if request.computed >= request.target:
                self._start_decoding(request)
        self._finish_due()

    def _account(self, seconds: float, compute: float, holdup: str | None) -> None:
        if holdup is not None:
            self.outcome.waiting[holdup] = self.outcome.waiting.get(holdup, 0.0) + seconds * len(self.waiting)
        self.outcome.busy_seconds += seconds
        self.outcome.compute_seconds += compute
        self.t += seconds

    # -- request life -------------------------------------------------------------------------------------
    def _start_decoding(self, request: SimRequest) -> None:
        """Its prefill (or recompute) is done: this step sampled its next token."""
        self.prefilling.remove(request)
        self.prefill_blocks -= self._blocks(request.computed)
        request.generated += 1
        if request.generated == 1:
            request.record.first_token = self.t
        else:
            self.outcome.gaps.add(self.t - request.last, 0.0, 1, 1)
        request.since, request.context = self.g, request.computed
        request.finish_step = self.g + request.record.output_tokens - request.generated
        self.decodes += 1
        self.context += request.computed
        heapq.heappush(self.finishing, (request.finish_step, id(request), request.version, request))

    def _finish_due(self) -> None:
        self._drop_stale()
        while self.finishing and self.finishing[0][0] <= self.g:
            request = heapq.heappop(self.finishing)[3]
            self._leave_decodes(request)
            del self.running[id(request)]
            request.record.finished = self.t
            self.done += 1
            self.in_flight -= 1
            self._release(self.t)
            self._drop_stale()

    def _drop_stale(self) -> None:
        while self.finishing and self.finishing[0][2] != self.finishing[0][3].version:
            heapq.heappop(self.finishing)

    def _leave_decodes(self, request: SimRequest) -> None:
        self.decodes -= 1
        self.context -= request.context + (self.g - request.since)
        request.version += 1

    def _preempt_last(self) -> bool:
        """Recompute preemption of the request admitted last: its blocks freed, back to the queue's front."""
        _, request = self.running.popitem()
        if request in self.prefilling:
            self.prefilling.remove(request)
            self.prefill_blocks -= self._blocks(request.computed)
            request.held = request.computed
        else:
            request.held = request.context + (self.g - request.since)
            request.generated += self.g - request.since  # one token a step since it began decoding
            self._leave_decodes(request)
            request.last = self.t
        request.target, request.computed = request.record.input_tokens + request.generated, 0
        request.evicted_at = self.allocated
        self.waiting.appendleft(request)
        self.outcome.preemptions += 1
        return True
