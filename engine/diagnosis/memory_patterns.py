"""Memory failures: KV cache too small at start-up, no room for blocks, memory held by other
processes, PyTorch's CUDA OOM in its three formats, preemption and a full KV cache (facts §2, §8, §9)."""

import re

from kvtool.engine.diagnosis.patterns import SIZE, Pattern, compile_

NEAR_FULL_PERCENT = 95.0


def _startup(category: str, gate: str, regex: str, **kw) -> Pattern:
    return Pattern(category, "startup", gate, compile_(regex), **kw)


KV_STARTUP = [
    _startup("kv_cache_too_small_at_startup", "max seq len",
             r"max seq len \((?P<max_model_len>\d+)\), \((?P<kv_needed_gib>-?[\d.]+) Gi?B KV cache is needed, which is larger than the available KV cache memory \((?P<kv_available_gib>-?[\d.]+) Gi?B\)"
             r"\.(?: Based on the available memory,(?: the estimated maximum model length is (?P<estimated_max_model_len>\d+))?)?"),
    _startup("kv_cache_too_small_at_startup", "max seq len",
             r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((?P<kv_cache_tokens>\d+)\)"),
    _startup("no_cache_blocks", "No available memory for the cache blocks", r"No available memory for the cache blocks"),
    _startup("no_cache_blocks", "Cannot auto-fit max_model_len", r"Cannot auto-fit max_model_len: not enough GPU memory"),
    _startup("gpu_memory_held_by_others", "Free memory on device",
             r"Free memory on device(?: \S+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<gpu_memory_utilization>[\d.]+), (?P<requested_gib>[\d.]+) GiB\)"),
    _startup("gpu_memory_held_by_others", "Error in memory profiling",
             r"Error in memory profiling\. Initial free memory (?P<initial_free_gib>[\d.]+) GiB, current free memory (?P<current_free_gib>[\d.]+) GiB"),
    _startup("batched_tokens_lt_model_len", "is smaller than max_model_len",
             r"max_num_batched_tokens \((?P<max_num_batched_tokens>\d+)\) is smaller than max_model_len \((?P<max_model_len>\d+)\)"),
    _startup("batched_tokens_lt_num_seqs", "max_num_batched_tokens (",
             r"max_num_batched_tokens \((?P<max_num_batched_tokens>\d+)\) must be greater than or equal to max_num_seqs \((?P<max_num_seqs>\d+)\)"),
    _startup("max_model_len_above_derived", "User-specified max_model_len",
             r"User-specified max_model_len \((?P<max_model_len>\d+)\) is greater than the derived max_model_len \(\w+=(?P<derived_max_model_len>[\d.]+)"),
]

_OOM_EXTRAS = tuple(re.compile(text) for text in (
    rf"total capaci?ty of (?P<total_gib>{SIZE}) of which (?P<free_gib>{SIZE}) is free",
    rf"\(GPU \d+; (?P<total_gib>{SIZE}) total capacity; (?P<allocated_gib>{SIZE}) already allocated; (?P<free_gib>{SIZE}) free;",
    rf"this process has (?P<this_process_gib>{SIZE}) memory in use",
    rf"Of the allocated memory (?P<allocated_gib>{SIZE}) is allocated by PyTorch",
    rf"and (?P<reserved_unallocated_gib>{SIZE}) is reserved by PyTorch but unallocated",
    rf"(?P<reserved_gib>{SIZE}) reserved in total by PyTorch",
))
CUDA_OOM = [
    _startup("cuda_oom_startup", "out of memory occurred when warming up",
             r"CUDA out of memory occurred when warming up (?P<warmup>sampler|pooler) with (?P<dummy_requests>\d+) dummy requests",
             detail="warmup"),
    # startup or runtime: the scanner decides from what the log showed before it
    Pattern("cuda_oom", "startup", "out of memory", compile_(rf"(?:CUDA|XPU) out of memory\. Tried to allocate (?P<tried_to_allocate_gib>{SIZE})"),
            extras=_OOM_EXTRAS),
]


def _runtime(category: str, gate: str, regex: str, accept) -> Pattern:
    return Pattern(category, "runtime", gate, compile_(regex), accept=accept)


def _preempted(numbers) -> bool:
    return numbers.get("num_preemptions", 0) > 0


def _near_full(numbers) -> bool:
    return numbers.get("kv_cache_usage_percent", 0) >= NEAR_FULL_PERCENT


RUNTIME = [
    _runtime("preemption", "is preempted by",
             r"Sequence group \S+ is preempted by PreemptionMode\.\w+ mode because there is not enough KV cache space\.[^=]{0,300}total_num_cumulative_preemption=(?P<num_preemptions>\d+)",
             _preempted),
    Pattern("preemption", "runtime", "Preemptions: ", compile_(r"Preemptions: (?P<num_preemptions>\d+)"),
            extras=(re.compile(r"Running: (?P<num_running>\d+) reqs"),), accept=_preempted),
    _runtime("preemption", "vllm:num_preemptions", r"^vllm:num_preemptions(?:_total)?(?:\{[^}]*\})? (?P<num_preemptions>[\d.eE+]+)", _preempted),
    *(_runtime("kv_cache_near_full", gate,  # only 9x.x% and 100% readings reach the regex
               r"Running: (?P<num_running>\d+) reqs, (?:Swapped: \d+ reqs, )?(?:Pending|Waiting): (?P<num_waiting>\d+) reqs,[^%]{0,60}KV cache usage: (?P<kv_cache_usage_percent>[\d.]+)%",
               _near_full) for gate in ("KV cache usage: 9", "KV cache usage: 100")),
    _runtime("kv_cache_near_full", "_cache_usage_perc",
             r"^vllm:(?:kv|gpu)_cache_usage_perc(?:\{[^}]*\})? (?P<kv_cache_usage>[\d.eE+-]+)",
             lambda numbers: numbers.get("kv_cache_usage", 0) * 100 >= NEAR_FULL_PERCENT),
]

PATTERNS = KV_STARTUP + CUDA_OOM + RUNTIME
