"""Every recogniser diagnose runs, in order (the first one of a category that matches a line wins):
those derived from the wordings (wordings.py), PyTorch's out-of-memory text, the Prometheus
counters and the 16-token default in a request log."""

import re

from kvtool.engine.diagnosis import api_patterns
from kvtool.engine.diagnosis.patterns import DETAIL_GROUPS, SIZE, Pattern, compile_, from_template
from kvtool.engine.diagnosis.wordings import WORDINGS, Wording
from kvtool.engine.sizing.defaults import KV_CACHE_NEAR_FULL_PERCENT, KV_CACHE_PRESSURE_PERCENT

NEAR_FULL_PERCENT = KV_CACHE_NEAR_FULL_PERCENT
PRESSURE_PERCENT = KV_CACHE_PRESSURE_PERCENT
FULL_PERCENT = 99.0  # a cache this full cannot give the next token its block: preemption follows at once
# A stats line worth a second look: requests wait while the cache is this full and prefixes are hit this often
# (on prompts that share none, only recomputed preempted requests hit: explain_pressure.py decides)
RECOMPUTE_USAGE_PERCENT, RECOMPUTE_HIT_PERCENT = 75.0, 10.0


def _preempted(numbers) -> bool:
    return numbers.get("num_preemptions", 0) > 0


def _near_full(numbers) -> bool:
    usage = numbers.get("kv_cache_usage_percent", numbers.get("kv_cache_usage", 0) * 100)
    if usage >= NEAR_FULL_PERCENT or numbers.get("num_swapped", 0) > 0:
        return True
    if numbers.get("num_waiting", 0) <= 0:
        return False
    hit_rate = numbers.get("prefix_cache_hit_rate_percent", 0)
    return usage > PRESSURE_PERCENT or (usage >= RECOMPUTE_USAGE_PERCENT and hit_rate >= RECOMPUTE_HIT_PERCENT)


ACCEPT = {"preemption": _preempted, "kv_cache_near_full": _near_full}


def from_wording(wording: Wording) -> Pattern:
    if wording.regex:
        regex, gate = compile_(wording.regex), re.search(r"[A-Za-z]{4,}", wording.regex).group(0)
    else:
        text, gate = from_template(wording.template)
        regex = re.compile(text)
    return Pattern(
        wording.category,
        wording.stage,
        gate,
        regex,
        accept=ACCEPT.get(wording.category),
        detail=next((name for name in regex.groupindex if name in DETAIL_GROUPS), None),
        label=wording.detail,
        constants=wording.constants,
        template=None if wording.regex else wording.template,
    )


def _unique(wordings: list[Wording]) -> list[Pattern]:
    """One recogniser per distinct regex (several releases share a prefix), in the wordings' order."""
    patterns, seen = [], set()
    for pattern in map(from_wording, wordings):
        if (pattern.category, pattern.regex.pattern) not in seen:
            seen.add((pattern.category, pattern.regex.pattern))
            patterns.append(pattern)
    return patterns


_OOM_EXTRAS = tuple(
    re.compile(text.replace(" ", r"\s+"))
    for text in (
        rf"total capaci?ty of (?P<total_gib>{SIZE}) of which (?P<free_gib>{SIZE}) is free",
        rf"\((?:GPU|NPU) \d+; (?P<total_gib>{SIZE}) total capacity; (?P<allocated_gib>{SIZE}) already allocated; "
        rf"(?:{SIZE} current active; )?(?P<free_gib>{SIZE}) free;",
        # a terminal's hard wrap may split "process" in two
        rf"this p\s*r\s*o\s*c\s*e\s*s\s*s has (?P<this_process_gib>{SIZE}) (?:memory )?in use",
        rf"Process \d+ has (?P<other_process_gib>{SIZE}) memory in use",  # another process on the same GPU
        rf"Of the allocated memory (?P<allocated_gib>{SIZE}) is allocated by PyTorch",
        rf"and (?P<reserved_unallocated_gib>{SIZE}) is reserved by PyTorch but unallocated",
        rf"(?P<reserved_gib>{SIZE}) reserved in total by PyTorch",
    )
)
_DEVICE = r"(?:CUDA|XPU|HIP|NPU)"
# The device's own words for an allocation that failed, with no sizes: a CUDA error raised as
# torch.AcceleratorError or RuntimeError, the driver's, NCCL's (often the only trace of it, inside a
# teardown error), the runtime's and cuBLAS's status names, and PyTorch's message cut before its sizes
# or after them. One line gives one out-of-memory error, the one with the most numbers (scanner.py).
_BARE_OOM = (
    rf"{_DEVICE} (?:driver )?error: out of memory"
    r"|Cuda failure (?:\d+ )?'out of memory'"
    r"|cudaErrorMemoryAllocation|hipErrorOutOfMemory"
    rf"|{_DEVICE} out of memory(?!\.? (?:occurred|Tried))"
    r"|unallocated memory is large try setting PYTORCH(?:_CUDA)?_ALLOC_CONF"  # the tail of a message cut short
)
TORCH_OOM = [  # the device's text, not vLLM's: start-up or run time is decided from the context (stage.py)
    Pattern(
        "cuda_oom",
        "startup",
        "emory",  # "CUDA out of memory. Tried to allocate", or "OutOfMemoryError: Tried to allocate" as quoted
        compile_(
            rf"(?:(?:{_DEVICE} out of memory\.|OutOfMemoryError:) |OutOfMemoryError\b[^\n]{{0,80}}?\b)"
            rf"Tried to allocate (?P<tried_to_allocate_gib>{SIZE})"
        ),
        extras=_OOM_EXTRAS,
    ),
    Pattern(  # PyTorch's message without its first sentence, as people quote it
        "cuda_oom",
        "startup",
        "allocate",
        compile_(rf"Tried to allocate (?P<tried_to_allocate_gib>{SIZE})\.? (?:GPU|NPU) \d+ has a total capaci?ty"),
        extras=_OOM_EXTRAS,
    ),
    Pattern(  # retold in prose: "CUDA OOM (tried to allocate 18.56 GiB, 6.02 GiB free)"
        "cuda_oom",
        "startup",
        "allocate",
        compile_(rf"\bOOM\b[^\n]{{0,80}}?\b[Tt]ried to allocate (?P<tried_to_allocate_gib>{SIZE})"),
    ),
    Pattern("cuda_oom", "startup", "emory", compile_(_BARE_OOM)),
    Pattern("cuda_oom", "startup", "_OUT_OF_MEMORY", compile_(r"CUDA_ERROR_OUT_OF_MEMORY")),
    Pattern("cuda_oom", "startup", "_ALLOC_FAILED", compile_(r"CUBLAS_STATUS_ALLOC_FAILED")),
    Pattern(  # XLA on TPU
        "cuda_oom",
        "startup",
        "RESOURCE_EXHAUSTED",
        compile_(r"RESOURCE_EXHAUSTED: [^\n]{0,200}?(?:[Aa]llocat|[Oo]ut of memory)"),
    ),
]
METRICS = [
    Pattern(
        "preemption",
        "runtime",
        "vllm:num_preemptions",
        re.compile(r"^vllm:num_preemptions(?:_total)?(?:\{[^}]*\})? (?P<num_preemptions>[\d.eE+]+)"),
        accept=_preempted,
    ),
    Pattern(
        "kv_cache_near_full",
        "runtime",
        "_cache_usage_perc",
        re.compile(r"^vllm:(?:kv|gpu)_cache_usage_perc(?:\{[^}]*\})? (?P<kv_cache_usage>[\d.eE+-]+)"),
        accept=lambda numbers: numbers.get("kv_cache_usage", 0) * 100 >= NEAR_FULL_PERCENT,
    ),
]
PREEMPTED = [  # vLLM's warning without its counter (cut, or before 0.4.3), retyped, and V1's resumed requests
    Pattern(
        "preemption",
        "runtime",
        "preempted",
        compile_(r"is preempted (?:by|in) PreemptionMode\.\w+ mode because there is not enough KV cache space"),
    ),
    Pattern("preemption", "runtime", "reempted request", compile_(r"Preempted request \S+ (?:has been )?resumed")),
]
DEFAULT_TRUNCATION = [  # a request log whose SamplingParams kept vLLM's default of 16 tokens
    Pattern(
        "max_tokens_default_truncation",
        "request",
        "max_tokens=16",
        compile_(r"SamplingParams\([^)]{0,4000}?\bmax_tokens=16[,)]"),
    ),
]

QUOTED = [  # the 0.2.7-0.10.2 message as people quote it, cut before the cache size: the cause without that number
    Pattern(
        "kv_cache_too_small_at_startup",
        "startup",
        "max seq len",
        compile_(
            r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that can be stored "
            r"in KV cache\b"
        ),
    ),
]

PATTERNS = _unique(WORDINGS) + TORCH_OOM + METRICS + PREEMPTED + DEFAULT_TRUNCATION + QUOTED + api_patterns.PATTERNS
