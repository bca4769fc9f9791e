"""A paste's start-up lines, read by kvtool's vLLM start-up log reader (kvtool.engine.startup_log.reader): the
release, the settings, what every rank measured (the tightest rank kept, as vLLM keeps it), the GPU and a
start-up failure's figures. `kvtool plan --from-log` reads logs with the same reader.

Whether the reader can read anything in a line (one of the messages it knows, or the flags and config it
reads) is decided once per line shape by the scanner; only those lines are kept, and read once at the end,
each as a record of its own (the paste's prefixes, wraps and escapes are undone by then). Of each shape the
last PER_SHAPE lines are kept: a launch prints each of its lines once per rank, and the reader answers for
the last launch.
"""

from collections import deque

from kvtool.engine.sizing.memory_budget import MemoryBudget
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import log_gpu, printed_parts
from kvtool.engine.startup_log.launch import launches
from kvtool.engine.startup_log.lines import LINES
from kvtool.engine.startup_log.reader import VllmStartupLog, read_startup_log
from kvtool.engine.startup_log.records import log_records
from kvtool.engine.startup_log.settings import stated_args
from kvtool.errors import UsageError

PER_SHAPE, MAX_SHAPES = 64, 256
_ARGS_MARKERS = ("args:", "config:", "vllm")  # where the flags and the engine's config line may be
_NOTHING_ESTIMATED = MemoryBudget(0, 1.0, 0, 0, 0, 0, 0)
# LogContext's name -> the reader's (VllmStartupLog's, or its MemoryProfile's with "memory.")
CONTEXT_NAMES = {
    "version": "vllm_version",
    "model": "model",
    "served_model_name": "served_model_name",
    "max_model_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "block_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "enforce_eager": "enforce_eager",
    "cuda_graph_profiling": "cudagraph_memory_profiling",
    "weights_gib": "memory.weights_memory_gib",
    "available_kv_gib": "memory.available_kv_cache_memory_gib",
    "num_gpu_blocks": "memory.num_gpu_blocks",
    "kv_cache_tokens": "memory.kv_cache_size_tokens",
    "max_concurrency": "memory.max_concurrency",
    "cuda_graph_estimate_gib": "memory.cudagraph_memory_estimate_gib",
    "cuda_graph_gib": "memory.cudagraph_memory_gib",
}

# a start-up failure's figures: diagnose's number names -> the reader's StartupFailure fields
FAILURE_NAMES = {
    "max_model_len": "max_model_len",
    "kv_needed_gib": "needed_kv_cache_memory_gib",
    "kv_available_gib": "available_kv_cache_memory_gib",
    "estimated_max_model_len": "estimated_max_model_len",
    "kv_cache_tokens": "kv_cache_size_tokens",
    "free_gib": "free_gpu_memory_gib",
    "total_gib": "total_gpu_memory_gib",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "requested_gib": "requested_memory_gib",
}


def reads(shape: str) -> bool:
    """Whether the start-up reader reads anything in a line of this shape (its patterns are digit-blind)."""
    compact = "".join(shape.split())
    if any(line.gate in compact and line.pattern.search(compact) for line in LINES):
        return True
    return any(marker in compact for marker in _ARGS_MARKERS) and stated_args(shape) is not None


class StartupLines:
    """The start-up lines of a paste, in order: of each shape the last PER_SHAPE (every rank of a large
    deployment, while a flood of one message, out-of-memory errors say, costs the reader nothing more), of at
    most MAX_SHAPES shapes."""

    def __init__(self):
        self._by_shape: dict[bytes, deque[tuple[int, str]]] = {}
        self._count = 0

    def add(self, line: str, shape: bytes) -> None:
        kept = self._by_shape.get(shape)
        if kept is None:
            if len(self._by_shape) >= MAX_SHAPES:
                return
            kept = self._by_shape[shape] = deque(maxlen=PER_SHAPE)
        self._count += 1
        kept.append((self._count, line))

    @property
    def lines(self) -> list[str]:
        return [line for _, line in sorted(entry for kept in self._by_shape.values() for entry in kept)]

    def read(self) -> VllmStartupLog | None:
        """What the lines say; a log of settings alone where they hold no memory line; None without lines."""
        lines = self.lines
        if not lines:
            return None
        text = "\n\n".join(lines)  # a blank line between them: each is a record of its own
        try:
            return read_startup_log(text)
        except UsageError:  # no memory line, or only a command line: the settings still count
            launch = launches(log_records(text))[-1]
            return VllmStartupLog(
                vllm_version=launch.vllm_version,
                engine=launch.engine,
                **launch.settings(),
                device_name=launch.device_name,
            )

    def line_of(self, name: str, value: object) -> str | None:
        """The last line that prints the reader's field `name` as `value`: the evidence of a figure."""
        for text in reversed(self.lines):
            compact = "".join(text.split())
            for line in LINES:
                if line.gate in compact and _prints(line, name, value, compact):
                    return text
        return None


def _prints(line, name: str, value: object, compact: str) -> bool:
    if name in line.fields:
        return any(reading.get(name) == value for reading in line.readings(compact))
    return (name, value) in line.sets and line.pattern.search(compact) is not None


def context_facts(log: VllmStartupLog) -> dict[str, object]:
    """The reader's facts by LogContext's names (those it states), the GPU's memory as `log_gpu` finds it."""
    facts = {name: _reader_value(log, path) for name, path in CONTEXT_NAMES.items()}
    if (gpu := log_gpu(log)) is not None:
        facts["total_gpu_gib"] = round(gpu.total_bytes / GiB, 2)
        facts["total_gpu_source"] = gpu.source
    printed = printed_parts(log, _NOTHING_ESTIMATED)  # 0.6.4's torch peak and 0.28's consumed memory taken apart
    facts["activation_peak_gib"] = _gib(printed.get("activation_bytes"))
    facts["non_torch_gib"] = _gib(printed.get("non_torch_bytes"))
    return {name: value for name, value in facts.items() if value is not None}


def _gib(size: int | None) -> float | None:
    return None if size is None else round(size / GiB, 4)


def _reader_value(log: VllmStartupLog, path: str) -> object:
    owner, _, name = path.rpartition(".")
    return getattr(log.memory if owner else log, name)


def with_failure(numbers: dict, category: str, log: VllmStartupLog | None) -> dict:
    """A start-up failure's numbers with those the reader read of the same failure (its category, every number
    both read equal) added: the reader reads records whole, across wraps a recogniser's line may not span."""
    failure = log.failure if log else None
    if failure is None or failure.category != category:
        return numbers
    read = {name: getattr(failure, field) for name, field in FAILURE_NAMES.items()}
    read = {name: value for name, value in read.items() if value is not None}
    if any(numbers[name] != value for name, value in read.items() if name in numbers):
        return numbers
    return {**read, **numbers}
