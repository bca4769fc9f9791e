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
