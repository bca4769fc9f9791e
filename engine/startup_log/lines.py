"""The start-up lines vLLM prints, release by release, as patterns over a log record.

Each `LogLine` is one message (or one clause of a long one) as vLLM formats it, its figures replaced by
placeholders: `{gib}` a size in GiB (signed: vLLM prints -0.03 GiB graphs), `{x}` a plain number, `{n}` a
count (with or without thousands commas), `{bytes}` a byte count (read as GiB), `{ver}` a release,
`{path}` a model id or path, `{word}` a name, `{_}` text that varies and is skipped. Matching is done on the
record with every space removed, so a paste that added a line break or dropped a space at a hard wrap
still matches. Where several lines give the same figure, the one listed first wins (the most precise).
The releases named for each line are where its source prints it (vllm/<file> in each release's wheel).
"""

import re
from dataclasses import dataclass
from functools import cached_property

from kvtool.engine.sizing.units import GiB

# Digits are bounded: a longer run is no figure vLLM printed (and past float's range it would read as infinity).
_KINDS = {
    "gib": (r"(-?\d{1,12}(?:\.\d+)?)", float),
    "x": (r"(\d{1,12}(?:\.\d+)?)", float),
    "n": (r"(\d[\d,]{0,19})(?![\d,]*\d)", lambda text: int(text.replace(",", ""))),
    "bytes": (r"(\d{1,18})", lambda text: int(text) / GiB),
    "ver": (r"(\d+\.\d+(?:\.\d+)*(?:\.?(?:rc|a|b|post|dev)\d+)*(?:\+[\w.]*\w)?)", str),
    "path": (r"""([^'",()]+)""", str),
    "word": (r"([\w-]+)", str),
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
KV_TOO_SMALL = "kv_cache_too_small_at_startup"
NO_CACHE_BLOCKS = "no_cache_blocks"
MEMORY_HELD_BY_OTHERS = "gpu_memory_held_by_others"
PROFILING = "cudagraph_memory_profiling"  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS


@dataclass(frozen=True)
class LogLine:
    template: str
    fields: tuple[str, ...] = ()  # what each placeholder holds, in order; "_" for one not kept
    releases: str = ""
    failure: str | None = None  # the start-up failure this line reports (its figures belong to it)
    engine: str | None = None  # the engine the line names: "V0" or "V1"
    only: str | None = None  # the engine when only that engine prints the line
    sets: tuple[tuple[str, object], ...] = ()  # settings the line implies by being there
    per_rank: bool = False  # every worker prints its own
    starts_launch: bool = False  # the API server's first lines: a second one means vLLM was started again

    @cached_property
    def pattern(self) -> re.Pattern:
        parts = _PLACEHOLDER.split(self.template)
        return re.compile("".join(_piece(part, index % 2 == 1) for index, part in enumerate(parts)))

    @cached_property
    def gate(self) -> str:
        """The longest fixed text of the line, a cheap test before the pattern."""
        return max(("".join(part.split()) for part in _PLACEHOLDER.split(self.template)[::2]), key=len)

    def readings(self, compact: str) -> list[dict[str, object]]:
        """The figures of each occurrence of this line in a record, by field."""
        kinds = [kind for kind in _PLACEHOLDER.findall(self.template) if kind != "_"]
        readers = [(name, _KINDS[kind][1]) for name, kind in zip(self.fields, kinds)]
        return [
            {name: read(value) for (name, read), value in zip(readers, match.groups()) if name != "_"}
            for match in self.pattern.finditer(compact)
        ]


def _piece(part: str, placeholder: bool) -> str:
    if not placeholder:
        return re.escape("".join(part.split()))
    return ".*?" if part == "_" else _KINDS[part][0]


def _v1(template: str, fields: tuple[str, ...], releases: str, **more) -> LogLine:
    return LogLine(template, fields, releases, only="V1", per_rank=True, **more)


def _v0(template: str, fields: tuple[str, ...], releases: str, **more) -> LogLine:
    return LogLine(template, fields, releases, only="V0", per_rank=True, **more)


# The "Free memory on device ... on startup. Desired GPU memory utilization ..." breakdown (gpu_worker.py).
_FREE_MEMORY_RELEASES = "INFO in 0.10.2 and from 0.26, DEBUG in 0.11 - 0.24"


def _v1_failure(template: str, fields: tuple[str, ...], releases: str, failure: str = KV_TOO_SMALL) -> LogLine:
    return LogLine(template, fields, releases, failure=failure, only="V1")


LINES = (
    # The release: the API server's banner, the engine's config line, a wheel or pip pin in a report.
    LogLine("vLLM API server version {ver}", ("vllm_version",), "0.4 - 0.13", starts_launch=True),
    LogLine("vLLM server version {ver}, serving model {path}", ("vllm_version", "model"), "0.15+", starts_launch=True),
    LogLine("█ version {ver}", ("vllm_version",), "0.15+ (the logo)", starts_launch=True),
    LogLine("█ model {path}", ("model",), "0.15+ (the logo)"),
    LogLine("Initializing a V1 LLM engine (v{ver}) with config:", ("vllm_version",), "0.7 - 0.34", engine="V1"),
    LogLine("Initializing a V0 LLM engine (v{ver}) with config:", ("vllm_version",), "0.7 - 0.10", engine="V0"),
    LogLine("Initializing an LLM engine (v{ver}) with config:", ("vllm_version",), "0.4 - 0.6", engine="V0"),
    LogLine("Initializing an LLM engine with config:", (), "0.2 - 0.3", engine="V0"),
    LogLine("vllm-{ver}-cp", ("vllm_version",), "a wheel file name"),
    LogLine("vllm=={ver}", ("vllm_version",), "a pip pin"),
    LogLine("vLLM Version: {ver}", ("vllm_version",), "collect_env output"),
    # Settings the engine states on its own (the flags are read from "non-default args" and the config line).
    LogLine("Using max model len {n}", ("max_model_len",), "0.9+"),
    LogLine(
        "Chunked prefill is enabled with max_num_batched_tokens={n}",
        ("max_num_batched_tokens",),
        "0.5 - 0.34",
        sets=(("enable_chunked_prefill", True),),
    ),
    LogLine("Chunked prefill is enabled (EXPERIMENTAL)", (), "0.4", sets=(("enable_chunked_prefill", True),)),
    LogLine("device_name={word}", ("device_name",), "fused-MoE and block-fp8 kernel config paths, 0.3+"),
    LogLine("CUDA graph memory profiling is enabled", (), "0.18 - 0.19 (opt-in), 0.20+", sets=((PROFILING, True),)),
    LogLine("CUDA graph memory profiling is disabled", (), "0.20+", sets=((PROFILING, False),)),
    LogLine("CUDA graph memory profiling will be enabled by default", (), "0.18 - 0.19", sets=((PROFILING, False),)),
    LogLine("The current --gpu-memory-utilization={x} is equivalent", ("gpu_memory_utilization",), "0.18+"),
    LogLine("increase --gpu-memory-utilization from {x} to", ("gpu_memory_utilization",), "0.18 - 0.19"),
    # What each worker measured. V1: gpu_model_runner.py, gpu_worker.py, kv_cache_utils.py.
    LogLine(
        "Model loading took {gib} GiB",
        ("weights_memory_gib",),
        "0.8+, V0 and V1 ('GiB memory and' from 0.12)",
        per_rank=True,
    ),
    _v1("Available KV cache memory: {gib} GiB", ("available_kv_cache_memory_gib",), "0.9+"),
    _v1("KV cache size: {n} tokens", ("kv_cache_size_tokens",), "0.8+ (one line with the concurrency from 0.28)"),
    _v1("Estimated CUDA graph memory: {gib} GiB total", ("cudagraph_memory_estimate_gib",), "0.18 - 0.33"),
    LogLine("Graph capturing finished in {_} secs, took {gib} GiB", ("cudagraph_memory_gib",), "0.6.4+", per_rank=True),
    _v1(
        "CUDA graph pool memory: {gib} GiB (actual), {gib} GiB (estimated)",
        ("cudagraph_memory_gib", "cudagraph_memory_estimate_gib"),
        "0.18+",
    ),
    LogLine(
        "Maximum concurrency for {n} tokens per request: {x}x",
        ("max_model_len", "max_concurrency"),
        "V0 0.6.3 - 0.10 (executor), V1 0.7+ (kv_cache_utils.py)",
        per_rank=True,
    ),
    _v1(
        "Free memory on device {_}({gib}/{gib} GiB) on startup",
        ("free_gpu_memory_gib", "total_gpu_memory_gib"),
        _FREE_MEMORY_RELEASES,
    ),
    _v1(
        "Desired GPU memory utilization is ({x}, {gib} GiB)",
        ("gpu_memory_utilization", "requested_memory_gib"),
        _FREE_MEMORY_RELEASES,
    ),
    _v1(
        "Actual usage is {gib} GiB for weight, {gib} GiB for peak activation, {gib} GiB for non-torch memory, "
        "and {gib} GiB for CUDAGraph memory",
        ("weights_memory_gib", "peak_activation_memory_gib", "non_torch_memory_gib", "cudagraph_memory_gib"),
        "0.10.2 - 0.26 (" + _FREE_MEMORY_RELEASES + ")",
    ),
    _v1(
        "Actual usage is {gib} GiB for consumed memory (weights + non-torch), {gib} GiB for peak activation, "
        "and {gib} GiB for CUDAGraph memory",
        ("consumed_memory_gib", "peak_activation_memory_gib", "cudagraph_memory_gib"),
        "0.28+",
    ),
    _v1(
        "`--kv-cache-memory={n}`{_}to fit into requested memory, or `--kv-cache-memory={n}`",
        ("kv_cache_memory_bytes_to_requested_limit", "kv_cache_memory_bytes_to_gpu_limit"),
        _FREE_MEMORY_RELEASES,
    ),
    _v1(
        "Initial free memory {gib} GiB, reserved {gib} GiB memory for KV Cache as specified by kv_cache_memory_bytes",
        ("free_gpu_memory_gib", "available_kv_cache_memory_gib"),
        "0.10.2+ (--kv-cache-memory given: no profiling)",
    ),
    _v1("Current kv cache memory in use is {bytes} bytes", ("available_kv_cache_memory_gib",), "0.10.2"),
    _v1("Current kv cache memory in use is {gib} GiB", ("available_kv_cache_memory_gib",), "0.11+ (debug to 0.24)"),
    # V1 debug lines (VLLM_LOGGING_LEVEL=DEBUG): gpu_worker.py and utils' MemoryProfilingResult.
    _v1("Initial free memory: {gib} GiB", ("free_gpu_memory_gib",), "0.9+"),
    _v1("requested GPU memory: {gib} GiB", ("requested_memory_gib",), "0.9 - 0.11"),
    _v1("Requested memory: {x} (util), {gib} GiB", ("gpu_memory_utilization", "requested_memory_gib"), "0.12+"),
    _v1("Total non KV cache memory: {gib}GiB", ("non_kv_cache_memory_gib",), "0.9+"),
    _v1("torch peak memory increase: {gib}GiB", ("peak_activation_memory_gib",), "0.9+"),
    _v1("non-torch forward increase memory: {gib}GiB", ("non_torch_memory_gib",), "0.9 - 0.30"),
    _v1("total consumed (from mem_get_info): {gib}GiB", ("consumed_memory_gib",), "0.33+"),
    _v1("weights memory: {gib}GiB", ("weights_memory_gib",), "0.9+"),
    LogLine("# GPU blocks: {n}", ("num_gpu_blocks",), "V1 0.6.4 - 0.7 (and the start of V0's line)"),
    LogLine("num_gpu_blocks is: {n}", ("num_gpu_blocks",), "0.9+ (the engine's final count, once)"),
    # V0: worker/worker.py, worker/model_runner.py, executor/*.
    LogLine(
        "Loading model weights took {gib} G",
        ("weights_memory_gib",),
        "0.4 - 0.7 (GB), XPU to 0.10 (GiB)",
        per_rank=True,
    ),
    _v0("model weights take {gib}GiB", ("weights_memory_gib",), "0.6.5 - 0.10"),
    _v0("non_torch_memory takes {gib}GiB", ("non_torch_memory_gib",), "0.6.5 - 0.10"),
    _v0("PyTorch activation peak memory takes {gib}GiB", ("peak_activation_memory_gib",), "0.6.5 - 0.10"),
    _v0("the rest of the memory reserved for KV Cache is {gib}GiB", ("available_kv_cache_memory_gib",), "0.6.5 - 0.10"),
    _v0(
        "total_gpu_memory ({gib}GiB) x gpu_memory_utilization ({x}) = {gib}GiB",
        ("total_gpu_memory_gib", "gpu_memory_utilization", "requested_memory_gib"),
        "0.6.5 - 0.10",
    ),
    _v0(
        "Memory profiling results: total_gpu_memory={gib}GiB initial_memory_usage={gib}GiB peak_torch_memory={gib}GiB "
        "memory_usage_post_profile={gib}GiB non_torch_memory={gib}GiB kv_cache_size={gib}GiB "
        "gpu_memory_utilization={x}",
        (
            "total_gpu_memory_gib",
            "_",
            "peak_torch_memory_gib",
            "_",
            "non_torch_memory_gib",
            "available_kv_cache_memory_gib",
            "gpu_memory_utilization",
        ),
        "0.6.4",
    ),
    LogLine(
        "# {word} blocks: {n}, # CPU blocks: {n}",
        ("_", "num_gpu_blocks", "num_cpu_blocks"),
        "0.2 - 0.10 ('# GPU blocks' to 0.6, '# cuda blocks' from 0.7)",
        only="V0",
    ),
    LogLine("total capacity of {gib} GiB", ("total_gpu_memory_gib",), "torch's CUDA out-of-memory error"),
    # Start-up failures: kv_cache_utils.py (V1), worker.py / llm_engine.py (V0), gpu_worker.py / worker/utils.py.
    _v1_failure("To serve at least one request with the {_} max seq len ({n})", ("max_model_len",), "0.7+"),
    _v1_failure("{gib} GiB KV cache is needed", ("needed_kv_cache_memory_gib",), "0.8+"),
    _v1_failure("{gib} GB KV cache is needed", ("needed_kv_cache_memory_gib",), "0.7"),
    _v1_failure("larger than the available KV cache memory ({gib} ", ("available_kv_cache_memory_gib",), "0.7+"),
    _v1_failure("the estimated maximum model length is {n}", ("estimated_max_model_len",), "0.8+"),
    LogLine(
        "The model's max seq len ({n}) is larger than the maximum number of tokens that can be stored in KV cache "
        "({n})",
        ("max_model_len", "kv_cache_size_tokens"),
        "0.2 - 0.10 (V0)",
        failure=KV_TOO_SMALL,
        only="V0",
    ),
    LogLine("No available memory for the cache blocks", (), "0.2+", failure=NO_CACHE_BLOCKS),
    _v1_failure(
        "Free memory on device {_}({gib}/{gib} GiB) on startup is less than desired GPU memory utilization "
        "({x}, {gib} GiB)",
        ("free_gpu_memory_gib", "total_gpu_memory_gib", "gpu_memory_utilization", "requested_memory_gib"),
        "0.9+ (the device named from 0.15)",
        MEMORY_HELD_BY_OTHERS,
    ),
)
# Words at least one of which every line holds: a record with none is skipped after one quick search.
_KEYWORDS = ("version", "█", "Initializing", "vllm", "memory", "took", "take", "blocks", "concurrency", "Chunked")
KEYWORDS = re.compile(
    "|".join(
        map(re.escape, _KEYWORDS + tuple(line.gate for line in LINES if not any(w in line.gate for w in _KEYWORDS)))
    )
)
