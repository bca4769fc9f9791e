"""What a log says about the server that wrote it: launch settings, model, memory profile, KV size, and what
only diagnose reads (whether it served, whether its start-up failed, priority scheduling, a benchmark of random
prompts, vLLM's advice on the utilization).

vLLM's own start-up lines (the banner, the flags and the engine's config line, every memory figure of every
rank) are read by kvtool's start-up log reader (startup.py), and what it reads wins. The same settings where
people state them otherwise (a wrapper's or LLM(...)'s arguments, another launcher's flags, prose) are read
here too, where the reader states nothing. Fixes are computed from these facts; the command line
(`--model`, `--gpu-mem`) may add or override them.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kvtool.engine.diagnosis import clients
from kvtool.engine.diagnosis.facts import Facts
from kvtool.engine.diagnosis.startup import CONTEXT_NAMES, StartupLines, context_facts
from kvtool.engine.diagnosis.truncation import answer_cut
from kvtool.engine.sizing.log_budget import catalog_gpu
from kvtool.engine.sizing.startup_log import VllmStartupLog
from kvtool.engine.sizing.units import GiB

# the settings read from the text's facts (quantities.py names them as LogContext does)
SETTINGS = (
    "max_model_len",
    "gpu_memory_utilization",
    "block_size",
    "kv_cache_dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "served_model_name",
    "enable_chunked_prefill",
    "enforce_eager",
)
# a GPU named in prose or a device line (the catalog knows its memory: log_budget.catalog_gpu)
_GPU_NAME = re.compile(  # digit-blind (its digits are classes): a line names a GPU where its shape does
    r"\b(?:RTX ?(?:A|PRO )?\d{4}(?: ?Ti| ?Ada)?|T\d|G[HB]\d{3}|MI\d{3}X?"
    r"|(?:A|H|B|L)\d{1,3}S?G?(?:[ -]?(?:SXM\d?|PCIe|NVL))?(?:[ -]?\d{2,3} ?GB)?"
    r"|V\d{3}(?:[ -]?SXM\d)?(?:[ -]?\d{2} ?GB)?)\b"
)
# prose that places a failure while serving
_SERVING_TOLD = re.compile(
    r"\b(?:under (?:heavy )?load|during (?:inference|serving|generation|decoding)|while (?:serving|generating)|"
    r"after (?:running|serving) for|in production|推理(?:时|过程中)|运行一段时间后|压测|"
    r"bajo carga|en producción|unter Last|im Betrieb|под нагрузкой|sob carga|em produção|sous charge|"
    r"高負荷|負荷(?:時|をかけ)|本番|부하|운영 중)",
    re.IGNORECASE,
)
# devices whose GPU shares the system's memory: NVIDIA GB10 (DGX Spark), Jetson, AMD's APUs (Strix Halo, Ryzen AI)
_UNIFIED = re.compile(r"GB10\b|DGX Spark|Jetson|AGX Thor|Strix Halo|gfx115[01]|Ryzen AI|AI Max|unified memory|统一内存")
# frames of vLLM's check that the KV cache holds one max_model_len request (v0's initialize_cache raises it)
_CACHE_CHECK = (
    "raise_if_cache_size_invalid",
    "method initialize_cache",
    "in initialize_cache",
    "enough_kv_cache_memory",
)
# words that say a setting means "no limit" (a client's -1)
_UNLIMITED = re.compile(
    r"\bno limit|\bunlimited|\binfinite|without (?:a |any )?limit|sin l[ií]mite|ilimitad|unbegrenzt|без ограничени|"
    r"無制限|무제한|无限制?|不限制?",
    re.IGNORECASE,
)
# the OpenAI server's log of a request it took (its chat or completion id), which passed its length check first
_ACCEPTED = re.compile(r"(?:Added|Received) request (?:chat)?cmpl-")
_MODEL = re.compile(
    r"""(?:vllm serve|--model[= ]|\bmodel=|['"]model['"]: |Starting to load model)\s*['"]?([\w./:@-]+[\w])"""
)
_VERSION = re.compile(r"vLLM (?:API server )?version (\d+\.\d+[\w.+]*)")
# vLLM's advice on its CUDA graph line (0.18 - 0.19), which the start-up reader does not keep
_SUGGESTED_UTILIZATION = re.compile(r"increas(?:e|ing) --gpu-memory-utilization (?:from [\d.]+ )?to (\d+(?:\.\d+)?)")
_SERVER_UP = ("Application startup complete", "Uvicorn running on", "Starting vLLM API server", "Avg prompt throughput")
STARTUP_FAILED = ("EngineCore failed to start", "Engine core initialization failed", "WorkerProc failed to start")
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
    pipeline_parallel_size: int | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    total_gpu_source: str | None = None  # "log" (printed), "catalog" (the device it names), "given" (--gpu-mem)
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
    gpu_name: str | None = None  # a GPU the text names ("RTX 4090", "A100 80GB")
    serving_told: bool = False  # the paste says in words that the server was serving (under load, during inference)
    unified_memory: bool = False  # a device whose GPU shares the system's memory (GB10, Jetson, Ryzen AI APUs)
    cache_check_failed: bool = False  # a traceback through the check that the KV cache holds one request
    request_accepted: bool = False  # the OpenAI server took a request (its id logged): it passed the length check
    priority_scheduling: bool = False  # requests preempted to admit higher-priority ones
    cut_told: str | None = None  # the line that says an answer was cut short (truncation.answer_cut)
    client: str | None = None  # a client, harness or trainer with an output cap of its own (clients.py)
    client_line: str | None = None  # the line that shows it
    unlimited_told: bool = False  # the paste says a setting means "no limit"
    facts: Facts = field(default_factory=Facts)  # every fact of the text (facts.py)
    read_lines: set[int] = field(default_factory=set)  # the lines a wording read (their facts are its numbers)
    errors: dict[frozenset[str], str] = field(default_factory=dict)  # error lines: consequence kinds -> the first
    startup: VllmStartupLog | None = None  # what the start-up reader read
    startup_lines: StartupLines | None = None  # the lines it read

    def read(self, line: str, readers: "Readers | None" = None) -> dict:
        """Take every fact `line` states (later lines win); returns them for `apply` to replay. `readers`: those of
        the line's shape, where the caller has them."""
        facts = facts_in(line, readers)
        self.apply(facts)
        return facts

    def apply(self, facts: dict) -> None:
        for name, value in facts.items():
            setattr(self, name, value)

    def take_facts(self, facts: Facts) -> None:
        """The launch settings the text states (flags, config keys, a wrapper's arguments, prose, a table), where
        vLLM's own start-up lines (take_startup, after) do not."""
        self.facts = facts
        for name in SETTINGS:
            if (fact := facts.setting(name)) is not None:
                setattr(self, name, fact.value)
        if (total := facts.setting("total_gib")) is not None:  # the GPU's memory as the text states it
            self.total_gpu_gib, self.total_gpu_source = total.value, "log"
        elif self.gpu_name and (gpu := catalog_gpu(self.gpu_name)) is not None:  # the GPU it names
            self.total_gpu_gib, self.total_gpu_source = round(gpu.total_bytes / GiB, 2), "catalog"

    def take_startup(self, lines: StartupLines) -> None:
        """What the start-up reader reads in the paste's start-up lines, over what was read before."""
        self.startup, self.startup_lines = lines.read(), lines
        if self.startup is not None:
            self.apply(context_facts(self.startup))

    def evidence(self, name: str) -> str:
        """The start-up line that prints the figure `name` holds (a failure the figures alone show)."""
        field = CONTEXT_NAMES[name].rpartition(".")[2]
        found = self.startup_lines and self.startup_lines.line_of(field, getattr(self, name))
        return found or ""

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
    readers = []
    if _read_model(shape, {}) is not None:
        readers.append(_read_model)
    if "-gpu-memory-utilization" in shape and _SUGGESTED_UTILIZATION.search(shape):
        readers.append(_read_suggestion)
    if flags := _flags(shape):
        readers.append(partial(_set, flags))
    if answer_cut(shape):
        readers.append(_read_cut)
    if client := clients.shown(shape):
        readers.append(partial(_read_client, client.name))
    return tuple(readers)


def _flags(shape: str) -> dict:
    """Facts a line states by what it says, not by a number."""
    flags = {}
    if any(marker in shape for marker in _SERVER_UP):
        flags["server_up"] = True
    if any(marker in shape for marker in STARTUP_FAILED):
        flags["startup_failed"] = True
    if _SERVING_TOLD.search(shape):
        flags["serving_told"] = True
    if _UNIFIED.search(shape):
        flags["unified_memory"] = True
    if any(marker in shape for marker in _CACHE_CHECK):
        flags["cache_check_failed"] = True
    if _ACCEPTED.search(shape):
        flags["request_accepted"] = True
    if "priority" in shape and ("reempt" in shape or "policy" in shape):
        flags["priority_scheduling"] = True
    if "dataset" in shape and _RANDOM_PROMPTS.search(shape):
        flags["random_prompts"] = True
    if _UNLIMITED.search(shape):
        flags["unlimited_told"] = True
    if any(marker in shape for marker in _CHUNKED_PREFILL_OFF):
        flags.update(enable_chunked_prefill=False, chunked_prefill_forced_off=True)
    return flags


def _set(flags: dict, line: str, facts: dict) -> None:
    facts.update(flags)


def _read_cut(line: str, facts: dict) -> None:
    facts["cut_told"] = line


def _read_client(name: str, line: str, facts: dict) -> None:
    facts["client"], facts["client_line"] = name, line


def _read_model(line: str, facts: dict) -> bool | None:
    """The model, the version and the GPU the line names; None where it names none."""
    found = None
    if match := _GPU_NAME.search(line):
        facts["gpu_name"], found = match.group(0), True
    if ("model" in line or "serve " in line) and (match := _MODEL.search(line)):
        facts["model"], found = match.group(1), True
    if "version" in line and (match := _VERSION.search(line)):
        facts["version"], found = match.group(1), True
    return found


def _read_suggestion(line: str, facts: dict) -> None:
    if match := _SUGGESTED_UTILIZATION.search(line):
        _convert_into(facts, "suggested_gpu_memory_utilization", match.group(1))


def _convert_into(facts: dict, name: str, text: str) -> None:
    try:
        facts[name] = float(text)
    except ValueError:
        pass
