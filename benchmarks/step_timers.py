"""Timers around the parts of a CPU engine step, for benchmarks/cpu_step_breakdown.py: the linear layers,
attention, the other kernels, the one-call C decode step, sampling, scheduling and the output processor."""

import time
from collections import defaultdict

PARTS = ("GEMMs", "attention", "other kernels", "one C call", "sampling", "scheduling", "outputs", "Python")


class PhaseTimers:
    """Seconds spent inside each wrapped callable, by part; `on` switches the timers."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self.on = False
        self._undo = []

    def wrap(self, owner, name: str, part: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if not self.on:
                return original(*args, **kwargs)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start

        _set(owner, name, timed)
        self._undo.append((owner, name, original))

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            _set(owner, name, original)


def _set(owner, name: str, value) -> None:
    if isinstance(owner, type):
        setattr(owner, name, value)
    else:  # KernelOps is a frozen dataclass
        object.__setattr__(owner, name, value)


def wrap_classes(timers: PhaseTimers) -> None:
    """The parts every engine in the process shares: the linear layers, attention, the one-call step."""
    from kvtool.engine.runtime.layers.attention import PagedAttention
    from kvtool.engine.runtime.worker.fused_decode import FusedDecode
    from kvtool.kernels.cpu_linear import PackedLinear
    from kvtool.kernels.quant_linear import QuantLinear

    for cls in (PackedLinear, QuantLinear):
        timers.wrap(cls, "forward", "GEMMs")
    timers.wrap(PagedAttention, "__call__", "attention")
    timers.wrap(FusedDecode, "_run", "one C call")


def wrap_engine(timers: PhaseTimers, engine) -> None:
    """The parts of one engine: its ops, sampler, scheduler, input batch and output processor."""
    runner = engine.model_runner
    for op in ("rms_norm", "rotary_embedding", "silu_and_mul"):  # each engine has its own KernelOps
        timers.wrap(runner.ops, op, "other kernels")
    timers.wrap(runner, "sampler", "sampling")
    timers.wrap(engine.scheduler, "schedule", "scheduling")
    timers.wrap(engine.scheduler, "update_from_output", "scheduling")
    timers.wrap(runner.input_batch, "prepare", "scheduling")
    timers.wrap(engine.output_processor, "process", "outputs")


STEP_KINDS = ("prefill only", "mixed", "decode only")
STEP_FIGURES = ("steps", "seconds", "prefill tokens", "decode rows", "thread-steps")


def step_kind(scheduled) -> str:
    """A scheduled step's kind: prompt chunks alone, prompt chunks beside decodes, or decodes alone."""
    if scheduled.num_decodes == len(scheduled.seqs):
        return "decode only"
    return "mixed" if scheduled.num_decodes else "prefill only"


class StepKindTimers:
    """Wraps an engine's step: per kind of step, its count, seconds, prompt tokens, decode rows, threads
    and the seconds of each part the PhaseTimers time (`timers.on` must be set for those)."""

    def __init__(self, timers: PhaseTimers, engine):
        import torch

        self.totals = {kind: defaultdict(float) for kind in STEP_KINDS}
        self._kind, self._scheduled = None, None
        step, schedule = engine.step, engine.scheduler.schedule

        def noted_schedule():
            self._scheduled = schedule()
            return self._scheduled

        def timed_step():
            before, start = dict(timers.seconds), time.perf_counter()
            outputs = step()
            elapsed = time.perf_counter() - start
            if self._scheduled is not None and self._scheduled.seqs:
                self._add(self._scheduled, elapsed, torch.get_num_threads())
                for part, seconds in timers.seconds.items():
                    self.totals[step_kind(self._scheduled)][part] += seconds - before.get(part, 0.0)
            self._scheduled = None
            return outputs

        engine.scheduler.schedule, engine.step = noted_schedule, timed_step

    def _add(self, scheduled, elapsed: float, threads: int) -> None:
        totals = self.totals[step_kind(scheduled)]
        totals["steps"] += 1
        totals["seconds"] += elapsed
        totals["decode rows"] += scheduled.num_decodes
        totals["prefill tokens"] += sum(scheduled.num_new_tokens) - scheduled.num_decodes
        totals["thread-steps"] += threads
