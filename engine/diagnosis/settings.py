"""The settings and measurements a finding carries beside what its message printed: those its fixes are sized on,
where the paste states them (the launch's flags, vLLM's start-up lines), and the load it happened under."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Finding, Numbers
from kvtool.engine.diagnosis.measured import ESTIMATED, MEASURED

_STARTUP = ("max_model_len", "num_gpu_blocks", "weights_gib", "total_gpu_gib", "max_num_batched_tokens")
_OOM = ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "kv_available_gib")
SETTINGS = {
    "kv_cache_too_small_at_startup": (*_STARTUP, "gpu_memory_utilization"),
    "no_cache_blocks": (*_STARTUP, "gpu_memory_utilization"),
    "gpu_memory_held_by_others": ("max_model_len",),
    "preemption": ("max_model_len", "tensor_parallel_size", "block_size", "gpu_memory_utilization", "max_num_seqs"),
    "cuda_oom_startup": (*_OOM, "weights_gib"),
    "cuda_oom_runtime": _OOM,
    "batched_tokens_lt_model_len": ("max_num_batched_tokens", "max_num_seqs", "num_speculative_tokens"),
}
# a finding's name for a setting the log context holds under another
CONTEXT_NAMES = {"kv_available_gib": "available_kv_gib"}
# what the requests of a load ask for (a sampling call's arguments, a client's settings)
LOAD_REQUESTS = ("max_tokens", "n")
# what an out-of-memory error retold in prose states beside the size it tried to allocate
TOLD_OOM = ("free_gib", "prompt_tokens")
# the load a runtime failure happened under: the last the paste states before it
LOAD = ("num_running", "num_waiting", "kv_cache_usage_percent")


def with_settings(finding: Finding, context: LogContext) -> None:
    """The finding's numbers with the settings its fixes are sized on, where the paste states them."""
    numbers = finding.numbers if isinstance(finding.numbers, Numbers) else Numbers(finding.numbers)
    finding.numbers = numbers
    for name in SETTINGS.get(finding.category, ()):
        if name not in numbers and (value := _setting(name, context)) is not None:
            catalog = name == "total_gpu_gib" and context.total_gpu_source == "catalog"
            numbers.put(name, value, ESTIMATED if catalog else MEASURED)
    if finding.category in ("cuda_oom_runtime", "cuda_oom_startup"):
        for name in TOLD_OOM:  # a message retold in prose: what it said the GPU had free, the prompt that failed
            if name not in numbers and (fact := context.facts.setting(name)) is not None:
                numbers.put(name, fact.value, MEASURED)
    if finding.category == "cuda_oom_runtime":
        for name in LOAD:
            if name not in numbers and (found := context.facts.of(name)):
                numbers.put(name, found[-1].value, MEASURED)
    if finding.category == "preemption":
        _pressure(numbers, context)


def _setting(name: str, context: LogContext):
    """A setting as the log context holds it (vLLM's start-up lines over the paste's facts), else as stated."""
    attribute = CONTEXT_NAMES.get(name, name)
    if hasattr(context, attribute):
        return getattr(context, attribute)
    fact = context.facts.setting(name)
    return fact.value if fact is not None else None


def _pressure(numbers: Numbers, context: LogContext) -> None:
    for name in LOAD_REQUESTS:
        if name not in numbers and (fact := context.facts.setting(name)) is not None:
            numbers[name] = fact.value
    if "kv_cache_usage_percent" not in numbers and (fullest := context.facts.largest("kv_cache_usage_percent")):
        numbers["kv_cache_usage_percent"] = fullest.value  # the load where the cache was fullest
        for fact in context.facts.in_lines(fullest.line, fullest.line):
            if fact.quantity in ("num_running", "num_waiting", "num_swapped", "cpu_kv_cache_usage_percent"):
                numbers.setdefault(fact.quantity, fact.value)
    for name in ("num_running", "num_waiting"):  # else the load told elsewhere (a scrape's gauges): its largest
        if name not in numbers and (found := context.facts.largest(name)):
            numbers[name] = found.value
    if context.priority_scheduling and (priorities := context.facts.of("priority")):
        numbers["priority"] = min(fact.value for fact in priorities)
