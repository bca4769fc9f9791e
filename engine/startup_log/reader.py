"""Read a vLLM start-up log (any release 0.4 - 0.34, as people paste or commit them) into what it says.

`read_startup_log(text)` returns a `VllmStartupLog`: the release and engine, the settings it ran with, the
GPU, what every rank measured (`rank_figures`) and the tightest of them (`memory`: the smallest KV budget, as
vLLM keeps; the largest overhead), and the start-up failure if vLLM stopped. A field is None where the log
does not say. Which release prints which line is in lines.py; how a paste is taken apart is in
records.py; the flags and config line are read by settings.py.
"""

from dataclasses import dataclass, field, fields
from pathlib import Path

from kvtool.engine.startup_log.launch import Launch, launches
from kvtool.engine.startup_log.records import log_records
from kvtool.errors import UsageError

_UNTIL_SIZED = "from its first line to 'GPU KV cache size' (V1) or '# GPU blocks' (V0)"
GIVE_THE_START = f"Give the server's output {_UNTIL_SIZED}, or to the error it stopped with."
GIVE_VLLM_OUTPUT = f"Give the output of `vllm serve` {_UNTIL_SIZED}."
EMPTY_LOG = "The start-up log is empty."
NOT_VLLM_LOG = "This is not a vLLM log: none of its lines is one vLLM prints."
TRUNCATED_LOG = 'The log stops before vLLM measured its memory; its last vLLM line is "{line}".'
NO_MEMORY_LINES = (
    "This vLLM log has no start-up memory lines ('Model loading took', 'Available KV cache memory', "
    "'# GPU blocks', 'GPU KV cache size', or a start-up error)."
)
UNREADABLE_LOG = "Cannot read the log file {path}: {reason}."


@dataclass(frozen=True)
class MemoryProfile:
    """What vLLM measured while starting, in GiB as it printed them (block, token and byte counts as counts)."""

    total_gpu_memory_gib: float | None = None
    free_gpu_memory_gib: float | None = None  # free when the worker started
    requested_memory_gib: float | None = None  # total x gpu_memory_utilization
    weights_memory_gib: float | None = None  # "Model loading took", "model weights take"
    peak_activation_memory_gib: float | None = None
    peak_torch_memory_gib: float | None = None  # 0.6.4: weights + activation peak
    non_torch_memory_gib: float | None = None
    consumed_memory_gib: float | None = None  # 0.28+: weights + non-torch
    non_kv_cache_memory_gib: float | None = None  # all of the above, as V1 takes it off the budget
    cudagraph_memory_gib: float | None = None  # captured ("Graph capturing finished ... took")
    cudagraph_memory_estimate_gib: float | None = None  # profiled before sizing the KV cache (0.18+)
    available_kv_cache_memory_gib: float | None = None
    kv_cache_memory_bytes_to_requested_limit: int | None = None  # the --kv-cache-memory vLLM suggests
    kv_cache_memory_bytes_to_gpu_limit: int | None = None
    num_gpu_blocks: int | None = None
    num_cpu_blocks: int | None = None
    kv_cache_size_tokens: int | None = None  # "GPU KV cache size: N tokens"
    max_concurrency: float | None = None  # "Maximum concurrency for L tokens per request: Xx"


@dataclass(frozen=True)
class StartupFailure:
    """The error vLLM stopped with while sizing memory, and its figures."""

    category: str  # kv_cache_too_small_at_startup | no_cache_blocks | gpu_memory_held_by_others
    message: str  # the record as printed
    max_model_len: int | None = None
    needed_kv_cache_memory_gib: float | None = None
    available_kv_cache_memory_gib: float | None = None
    estimated_max_model_len: int | None = None
    kv_cache_size_tokens: int | None = None  # V0: "the maximum number of tokens that can be stored in KV cache"
    free_gpu_memory_gib: float | None = None
    total_gpu_memory_gib: float | None = None
    gpu_memory_utilization: float | None = None
    requested_memory_gib: float | None = None


@dataclass(frozen=True)
class VllmStartupLog:
    """What one vLLM start-up log says (the last start when the log holds several)."""

    vllm_version: str | None = None  # as printed, e.g. "0.10.1.1", "0.11.0+582e4e37.nv25.11"
    engine: str | None = None  # "V0" or "V1"
    model: str | None = None
    served_model_name: str | None = None
    dtype: str | None = None  # "bfloat16", "float16", "auto"
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool | None = None
    enforce_eager: bool | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    cudagraph_memory_profiling: bool | None = None  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (0.18+)
    device_name: str | None = None  # the GPU, e.g. "NVIDIA H100 80GB HBM3"
    memory: MemoryProfile = MemoryProfile()  # the tightest rank: smallest KV figures, largest overheads
    num_ranks: int | None = None  # how many ranks printed their own figures
    rank_figures: dict[str, tuple[float, ...]] = field(default_factory=dict, hash=False)  # field -> one per rank
    failure: StartupFailure | None = None
    args: dict[str, object] = field(default_factory=dict, hash=False)  # the flags as printed (non-default args)


def read_startup_log(text: str) -> VllmStartupLog:
    """What the log says; UsageError (one line, with the fix) when it is empty, not vLLM's, or holds no
    start-up memory line."""
    records = log_records(text)
    if not any(record.compact for record in records):
        raise UsageError(EMPTY_LOG, GIVE_THE_START)
    launch = _measured(launches(records))
    if not launch.is_vllm:
        raise UsageError(NOT_VLLM_LOG, GIVE_VLLM_OUTPUT)
    if not launch.figures and not launch.failure_category:
        raise UsageError(_missing_memory(launch), GIVE_THE_START)
    return _startup_log(launch)


def read_startup_log_file(path: str | Path) -> VllmStartupLog:
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError as err:
        raise UsageError(UNREADABLE_LOG.format(path=path, reason=err.strerror or err), "Check the path.") from None
    return read_startup_log(text)


def _measured(all_launches: list[Launch]) -> Launch:
    """The last start that measured something (a log may hold several starts), else the last."""
    measured = [launch for launch in all_launches if launch.figures or launch.failure_category]
    return (measured or all_launches)[-1]


def _missing_memory(launch: Launch) -> str:
    """Why the log gives no figure: it stops early (vLLM had started), or it is not a start-up's log."""
    line = " ".join(launch.last_vllm_line.split())
    if not launch.started or not line:
        return NO_MEMORY_LINES
    return TRUNCATED_LOG.format(line=line if len(line) <= 72 else line[:69] + "...")


def _startup_log(launch: Launch) -> VllmStartupLog:
    memory = MemoryProfile(**{spec.name: launch.tightest(spec.name) for spec in fields(MemoryProfile)})
    failure = None
    if launch.failure_category:
        failure = StartupFailure(launch.failure_category, launch.failure_message, **launch.failure_figures)
    return VllmStartupLog(
        vllm_version=launch.vllm_version,
        engine=launch.engine,
        **launch.settings(),
        device_name=launch.device_name,
        memory=memory,
        num_ranks=max(map(len, launch.rank_figures().values()), default=None),
        rank_figures=launch.rank_figures(),
        failure=failure,
        args=launch.args,
    )
