"""What a log says about the server that wrote it: launch flags, model, memory profile, KV size.

Fixes are computed from these facts; the command line (`--model`, `--gpu-mem`) may add or
override them.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import partial

_SIZE = r"(-?[\d.]+) ?Gi?B"
# flag or config key → LogContext field; matches `--max-model-len 4096`, `max_model_len=4096`, `'max_model_len': 4096`
_KEY_FIELDS = {
    "max_model_len": "max_model_len",
    "max_seq_len": "max_model_len",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "block_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "tensor_parallel_size": "tensor_parallel_size",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "served_model_name": "served_model_name",
    "enable_chunked_prefill": "enable_chunked_prefill",
}
_KEY_VALUE = re.compile(
    r"(?<![\w-])(?:--)?(" + "|".join(k.replace("_", "[-_]") for k in _KEY_FIELDS) + r"|-tp)"
    r"""['"]?(?:\s*[:=]\s*|\s+)\[?['"]?([\w./:-]+)"""
)
_MODEL = re.compile(
    r"""(?:vllm serve|--model[= ]|\bmodel=|['"]model['"]: |Starting to load model)\s*['"]?([\w./:@-]+[\w])"""
)
_VERSION = re.compile(r"vLLM (?:API server )?version (\d+\.\d+[\w.+]*)|\(v(\d+\.\d+[\w.+]*)\) with config")
_READINGS = [  # (gate, pattern, field)
    ("weights t", re.compile(r"model weights (?:took|take) " + _SIZE), "weights_gib"),
    ("loading took", re.compile(r"Model loading took " + _SIZE), "weights_gib"),
    ("total_gpu_memory", re.compile(r"total_gpu_memory \(" + _SIZE), "total_gpu_gib"),
    ("total_gpu_memory", re.compile(r"gpu_memory_utilization \(([\d.]+)\)"), "gpu_memory_utilization"),
    ("non_torch", re.compile(r"non_torch_memory takes " + _SIZE), "non_torch_gib"),
    ("activation peak", re.compile(r"activation peak memory takes " + _SIZE), "activation_peak_gib"),
    ("reserved for KV", re.compile(r"reserved for KV Cache is " + _SIZE), "available_kv_gib"),
    ("KV cache memory:", re.compile(r"Available KV cache memory: " + _SIZE), "available_kv_gib"),
    (" blocks: ", re.compile(r"# (?:GPU|cuda|CUDA|\w+) blocks: (\d+)"), "num_gpu_blocks"),
    ("KV cache size", re.compile(r"KV cache size: ([\d,]+) tokens"), "kv_cache_tokens"),
    ("oncurrency", re.compile(r"concurrency for ([\d,]+) tokens per request: ([\d.]+)x"), "max_concurrency"),
    ("max model len", re.compile(r"Using max model len (\d+)"), "max_model_len"),
    ("total capac", re.compile(r"total capaci?ty of " + _SIZE), "total_gpu_gib"),
    ("Free memory on device", re.compile(r"Free memory on device[^(]{0,40}\(" + r"[\d.]+/" + _SIZE), "total_gpu_gib"),
    ("hunked prefill is enabled with",
     re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)"), "max_num_batched_tokens"),
    ("CUDA graph memory:", re.compile(r"Estimated CUDA graph memory: " + _SIZE), "cuda_graph_estimate_gib"),
    ("Graph capturing finished", re.compile(r"Graph capturing finished in \d+ secs?, took " + _SIZE), "cuda_graph_gib"),
    ("graph memory profiling", re.compile(r"CUDA graph memory profiling (is enabled|is disabled|will be enabled)"),
     "cuda_graph_profiling"),
    ("-gpu-memory-utilization",
     re.compile(r"increas(?:e|ing) --gpu-memory-utilization (?:from [\d.]+ )?to (\d+(?:\.\d+)?)"),
     "suggested_gpu_memory_utilization"),
]  # fmt: skip
# how vLLM says whether the KV cache budget leaves room for CUDA graphs (0.18 onwards)
_GRAPH_PROFILING = {"is enabled": True, "is disabled": False, "will be enabled": False}
# flags, config dumps and the engine's Python arguments (LLM(...) or a wrapper's)
_LAUNCH_MARKERS = ("--", "args", "config", "Namespace(", "max_model_len=", "max_model_len'", "gpu_memory_utilization=")
_SERVER_UP = ("Application startup complete", "Uvicorn running on", "Starting vLLM API server", "Avg prompt throughput")
_STARTUP_FAILED = ("EngineCore failed to start", "Engine core initialization failed", "WorkerProc failed to start")
# v0 turning chunked prefill off after the step budget was chosen for it (0.7 for MLA models, the CPU backend)
_CHUNKED_PREFILL_OFF = ("forcing chunked prefill", "Chunked prefill is not supported on CPU")
# a benchmark of random prompts, which share no prefix
_RANDOM_PROMPTS = re.compile(r"""dataset[-_]name['"]?\s*[=:]?\s*['"]?random\b""")


@dataclass
class LogContext:
    """Facts read from the log (or given on the command line); None when unknown."""

    model: str | None = None
    served_model_name: str | None = None
    version: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    non_torch_gib: float | None = None
    activation_peak_gib: float | None = None
    available_kv_gib: float | None = None
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    cuda_graph_estimate_gib: float | None = None  # what the budget set aside for CUDA graphs (0.19 onwards)
    cuda_graph_gib: float | None = None  # what the capture took
    cuda_graph_profiling: bool | None = None  # whether the KV cache budget leaves room for the graphs
    suggested_gpu_memory_utilization: float | None = None  # vLLM's own advice on the CUDA graph line
    server_up: bool = False
    startup_failed: bool = False
    chunked_prefill_forced_off: bool = False
    random_prompts: bool = False  # a benchmark of random prompts: a prefix cache hit means a recomputed request
    priority_scheduling: bool = False  # requests preempted to admit higher-priority ones
    lines: dict[str, str] = field(default_factory=dict)  # reading -> the line it came from

    def read(self, line: str, readers: "Readers | None" = None) -> dict:
        """Take every fact `line` states (later lines win); returns them for `apply` to replay. `readers`: those of
        the line's shape, where the caller has them."""
        facts = facts_in(line, readers)
        self.apply(facts)
        return facts

    def apply(self, facts: dict) -> None:
        for name, value in facts.items():
            if name.startswith("line:"):
                self.lines[name[5:]] = value
            else:
                setattr(self, name, value)

    def update(self, **facts) -> None:
        """Facts from the command line override the log."""
        for name, value in facts.items():
            if value is not None:
                setattr(self, name, value)


Readers = tuple[Callable[[str, dict], None], ...]


def facts_in(line: str, readers: Readers | None = None) -> dict:
    """Every fact `line` states, read by `readers` (fact_readers of its shape), or by those of the line itself."""
    facts = {}
    for reader in fact_readers(line) if readers is None else readers:
        reader(line, facts)
    return facts


def fact_readers(shape: str) -> Readers:
    """What can read a fact in lines of this shape. The regexes are digit-blind (shapes.py) and a number converts
    whatever its digits, so a line states the facts its shape does, at the same places."""
    readers = [_read_keys] if any(marker in shape for marker in _LAUNCH_MARKERS) else []
    if _read_model(shape, {}) is not None:
        readers.append(_read_model)
    readers += [
        partial(_read_one, pattern, name)
        for gate, pattern, name in _READINGS
        if gate in shape and pattern.search(shape)
    ]
    if flags := _flags(shape):
        readers.append(partial(_set, flags))
    return tuple(readers)


def _flags(shape: str) -> dict:
    """Facts a line states by what it says, not by a number."""
    flags = {}
    if any(marker in shape for marker in _SERVER_UP):
        flags["server_up"] = True
    if any(marker in shape for marker in _STARTUP_FAILED):
        flags["startup_failed"] = True
    if "priority" in shape and ("reempt" in shape or "policy" in shape):
        flags["priority_scheduling"] = True
    if "dataset" in shape and _RANDOM_PROMPTS.search(shape):
        flags["random_prompts"] = True
    if any(marker in shape for marker in _CHUNKED_PREFILL_OFF):
        flags.update(enable_chunked_prefill=False, chunked_prefill_forced_off=True)
    return flags


def _set(flags: dict, line: str, facts: dict) -> None:
    facts.update(flags)


def _read_keys(line: str, facts: dict) -> None:
    """The first value of each key in the line: later ones are vLLM's comments on it ("equivalent to ...")."""
    for match in reversed(list(_KEY_VALUE.finditer(line))):
        key = match.group(1).replace("-", "_")
        _convert_into(facts, "tensor_parallel_size" if key == "_tp" else _KEY_FIELDS.get(key, ""), match.group(2))
    if "-enable-chunked-prefill" in line:
        facts["enable_chunked_prefill"] = "--no-enable-chunked-prefill" not in line


def _read_model(line: str, facts: dict) -> bool | None:
    """The model and the version the line names; None where it names neither."""
    found = None
    if ("model" in line or "serve " in line) and (match := _MODEL.search(line)):
        facts["model"], found = match.group(1), True
    if ("version" in line or "with config" in line) and (match := _VERSION.search(line)):
        facts["version"], found = match.group(1) or match.group(2), True
    return found


def _read_one(pattern: re.Pattern, name: str, line: str, facts: dict) -> None:
    if match := pattern.search(line):
        _convert_into(facts, name, match.group(match.lastindex))
        facts["line:" + name] = line
        if name == "max_concurrency":
            _convert_into(facts, "max_model_len", match.group(1))


def _convert_into(facts: dict, name: str, text: str) -> None:
    kind = _FIELD_TYPES.get(name)
    value = None if kind is None else _convert(kind, text)
    if value is not None:
        facts[name] = value


def _convert(kind: str, text: str):
    if text in _GRAPH_PROFILING:
        return _GRAPH_PROFILING[text]
    text = text.replace(",", "").strip("'\"")
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        return None
    if kind == "bool":
        return {"true": True, "false": False}.get(text.lower())
    return text if text.lower() not in ("none", "null", "auto") or kind == "str_auto" else None


_TYPE_NAMES = {int | None: "int", float | None: "float", bool | None: "bool"}
_FIELD_TYPES = {
    f.name: _TYPE_NAMES.get(f.type, "str") for f in fields(LogContext) if f.type is not bool and f.name != "lines"
}
_FIELD_TYPES["kv_cache_dtype"] = "str_auto"
