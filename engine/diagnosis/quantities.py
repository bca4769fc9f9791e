"""The quantities diagnose reads, each under vLLM's name, with every name and wording people give it: the keys
(flags, config keys, request fields, the aliases of other servers and wrappers) and the words of prose, in
English and Chinese. facts.py reads them; a key's `-`, `--`, case and dotted path do not matter."""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    name: str
    kind: str  # int | float | fraction (0-1) | percent | gib | ms | str | bool


def _q(name: str, kind: str = "int") -> Quantity:
    return Quantity(name, kind)


MAX_MODEL_LEN, MAX_TOKENS, PROMPT_TOKENS = _q("max_model_len"), _q("max_tokens"), _q("prompt_tokens")
COMPLETION_TOKENS, UTILIZATION = _q("completion_tokens"), _q("gpu_memory_utilization", "fraction")
KV_USAGE, RUNNING, WAITING = _q("kv_cache_usage_percent", "percent"), _q("num_running"), _q("num_waiting")
CONCURRENCY, TPOT, TTFT = _q("concurrency"), _q("tpot_ms", "ms"), _q("ttft_ms", "ms")
BLOCKS, BATCHED = _q("num_gpu_blocks"), _q("max_num_batched_tokens")

_ALIASES: dict[Quantity, tuple[str, ...]] = {
    MAX_MODEL_LEN: ("max_model_len", "max_seq_len", "max_model_length", "max_seq_length", "vllm_max_model_len",
                    "vllm_maxlen", "model_max_len", "max_total_tokens", "n_ctx", "num_ctx", "ctx_size",
                    "context_length", "context_len", "max_context_length", "max_context_len"),
    MAX_TOKENS: ("max_tokens", "max_completion_tokens", "max_new_tokens", "n_predict", "num_predict", "max_gen_toks",
                 "max_output_tokens", "max_tokens_to_sample", "max_length_generation", "response_length"),
    PROMPT_TOKENS: ("prompt_tokens", "input_tokens", "num_prompt_tokens", "prompt_len", "prompt_length",
                    "input_len", "input_length", "num_tokens", "prompt_token_count", "input_token_count"),
    COMPLETION_TOKENS: ("completion_tokens", "output_tokens", "generated_tokens", "num_generated_tokens",
                        "output_len", "completion_token_count"),
    _q("requested_tokens"): ("total_tokens_requested",),
    _q("total_tokens"): ("total_tokens",),  # a usage block's prompt + completion
    UTILIZATION: ("gpu_memory_utilization", "gpu_memory_utilisation", "gpu_util", "vllm_gpu_util", "gpu_mem_util",
                  "mem_fraction_static", "gpu_memory_fraction"),
    _q("block_size"): ("block_size",),
    _q("kv_cache_dtype", "str"): ("kv_cache_dtype",),
    _q("tensor_parallel_size"): ("tensor_parallel_size", "tp", "tp_size", "tensor_parallel",
                                 "tensor_model_parallel_size"),
    _q("pipeline_parallel_size"): ("pipeline_parallel_size", "pp", "pp_size", "pipeline_parallel"),
    _q("max_num_seqs"): ("max_num_seqs", "max_batch_size", "max_running_requests"),
    BATCHED: ("max_num_batched_tokens", "max_batch_prefill_tokens", "chunked_prefill_size"),
    _q("max_num_scheduled_tokens"): ("max_num_scheduled_tokens",),
    _q("num_speculative_tokens"): ("num_speculative_tokens", "num_draft_tokens"),
    _q("max_prompt_length"): ("max_prompt_length",),
    _q("max_response_length"): ("max_response_length",),
    _q("n"): ("n",),
    BLOCKS: ("num_gpu_blocks", "gpu_blocks", "num_gpu_blocks_override"),
    KV_USAGE: ("kv_cache_usage", "gpu_cache_usage", "kv_cache_usage_perc", "gpu_cache_usage_perc",
               "gpu_kv_cache_usage", "kv_usage"),
    RUNNING: ("running", "num_running", "num_requests_running", "running_reqs"),
    WAITING: ("waiting", "pending", "num_waiting", "num_requests_waiting", "pending_reqs", "waiting_reqs"),
    _q("num_swapped"): ("swapped", "num_swapped"),
    CONCURRENCY: ("max_concurrency", "concurrency", "num_concurrent_requests", "parallel_requests"),
    _q("num_prompts"): ("num_prompts",),
    TPOT: ("tpot", "mean_tpot_ms", "median_tpot_ms", "tpot_ms", "itl", "mean_itl_ms"),
    TTFT: ("ttft", "mean_ttft_ms", "median_ttft_ms", "ttft_ms"),
    _q("num_preemptions"): ("total_num_cumulative_preemption", "num_preemptions", "preemptions",
                           "total_cumulative_preemption_cnt"),
    _q("priority"): ("priority",),
    _q("finish_reason", "str"): ("finish_reason",),
    _q("model", "str"): ("model", "model_path", "model_name_or_path", "pretrained", "model_name"),
    _q("served_model_name", "str"): ("served_model_name",),
    _q("dtype", "str"): ("dtype", "torch_dtype"),
    _q("enforce_eager", "bool"): ("enforce_eager",),
    _q("enable_chunked_prefill", "bool"): ("enable_chunked_prefill",),
    _q("cpu_offload_gb", "gib"): ("cpu_offload_gb",),
    _q("total_gib", "gib"): ("total_gpu_memory", "total_memory", "gpu_total_memory"),
    _q("initial_memory_usage_gib", "gib"): ("initial_memory_usage",),
    _q("num_cpu_blocks"): ("num_cpu_blocks", "cpu_blocks"),
}  # fmt: skip
KEYS = {alias: quantity for quantity, aliases in _ALIASES.items() for alias in aliases}


def _words(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


# words of prose, each list matched against the few words around a number of the quantity's kind
_PROSE = {
    MAX_MODEL_LEN: (
        r"concurrency for",  # vLLM's "Maximum concurrency for 32,768 tokens per request"
        r"max(?:imum)?[ _-]?(?:model|context|seq(?:uence)?)[ _-]?len(?:gth)?(?: of)?",
        r"context (?:length|window|size|len)(?: of| is)?",
        r"上下文(?:长度|窗口)?(?:为|是)?",
        r"最大(?:模型)?长度(?:为|是)?",
    ),
    MAX_TOKENS: (
        r"max(?:imum)?[ _-]?(?:new[ _-]|output[ _-]|completion[ _-]|generat\w*[ _-])?tokens(?: of| is| to)?",
        r"in the completion|最大输出(?:长度)?|输出长度",
    ),
    PROMPT_TOKENS: (
        r"(?:prompt|input)s?[ _-]?(?:length|len|tokens?)(?: of| is)?",
        r"(?:prompt|input)s? (?:has|have|contains?|is|of|with)(?: about| at least)?",
        r"in the (?:messages|prompt|input)",
        r"输入(?:长度|token数?)|提示词?长度",
    ),
    COMPLETION_TOKENS: (
        r"completion[ _]tokens|output tokens|generated tokens",
        r"(?:only|just|stops? (?:at|after)|cut (?:off|short) (?:at|after)|truncated (?:at|after)|after)(?= ?$)",
        r"只(?:输出|生成)了?",
    ),
    UTILIZATION: (r"utili[sz]ation(?: of| is| at| to)?|gpu[ _-]?util", r"显存利用率|利用率"),
    _q("cpu_kv_cache_usage_percent", "percent"): (r"CPU KV cache usage",),
    KV_USAGE: (
        r"(?:KV[ -]?)?cache(?: usage| utili[sz]ation| use| occupancy| is| was| at| reached| hits?| full)*(?: of)?",
        r"KV usage|cache usage|KV ?缓存(?:使用率|占用率?)?",
    ),
    _q("prefix_cache_hit_rate_percent", "percent"): (r"prefix cache hit rate|hit rate",),
    RUNNING: (r"running(?: requests)?|in flight|正在运行|运行中",),
    WAITING: (r"waiting(?: requests)?|pending|queued|排队|等待",),
    CONCURRENCY: (r"concurren(?:cy|t requests?)(?: of)?|并发(?:数|请求)?",),
    TPOT: (r"TPOT|time per output token|ITL|inter[- ]token latency|decode latency",),
    TTFT: (r"TTFT|time to first token|首(?:个)?token",),
    _q("kv_cache_tokens"): (
        r"KV cache size:?|KV cache (?:can )?(?:only )?(?:holds?|stores?|fits?)(?: only)?",
        r"KV ?(?:cache|缓存) ?(?:只能|最多)(?:存|容纳|放)下?",
    ),
    BLOCKS: (r"# ?(?:GPU|cuda) blocks:?|GPU blocks",),
    _q("num_cpu_blocks"): (r"# ?CPU blocks:?",),
    BATCHED: (r"max[ _-]num[ _-]batched[ _-]tokens",),
}
_GIB = "gib"
_MEMORY = {
    _q("tried_to_allocate_gib", _GIB): (r"allocate",),
    _q("kv_needed_gib", _GIB): (r"needs? (?:a |an )?KV cache of|KV cache (?:needs?|is needed)",),
    _q("kv_available_gib", _GIB): (r"(?:available )?KV cache (?:memory|size)|kv_cache_size|KV ?缓存",),
    _q("weights_gib", _GIB): (r"weights?(?: take| took| of)?|model loading took|权重",),
    _q("requested_gib", _GIB): (r"request(?:ed|s)?|requir(?:ed|es)|desired|asks? for|needs?|要求的?|需要",),
    _q("this_process_gib", _GIB): (r"(?:this process|vLLM) (?:has|holds|uses)|in use|used|占用",),
    _q("free_gib", _GIB): (r"free|available|left|剩余|可用|空闲",),
    _q("total_gib", _GIB): (
        r"(?:free|available|left) (?:out )?of",
        r"total(?: capacity| memory)?(?: of)?|capacity of|VRAM|(?:GPU|card) (?:has|with)",
        r"GPU|card|显存|总",
    ),
}
# a quantity's words hold one of these (lowercase): a line without any holds none of its words
_GATES = {
    "max_model_len": ("len", "concurrency", "上下文", "长度"),
    "max_tokens": ("token", "completion", "输出"),
    "prompt_tokens": ("prompt", "input", "num_tokens", "messages", "输入", "提示"),
    "completion_tokens": ("token", "only", "just", "stop", "cut", "truncat", "after", "只"),
    "gpu_memory_utilization": ("util", "利用率"),
    "cpu_kv_cache_usage_percent": ("cpu",),
    "kv_cache_usage_percent": ("cache", "kv"),
    "prefix_cache_hit_rate_percent": ("hit rate",),
    "num_running": ("running", "in flight", "运行"),
    "num_waiting": ("waiting", "pending", "queued", "排队", "等待"),
    "concurrency": ("concurren", "并发"),
    "tpot_ms": ("tpot", "time per", "itl", "inter", "latency"),
    "ttft_ms": ("ttft", "first token", "首"),
    "kv_cache_tokens": ("kv",),
    "num_gpu_blocks": ("blocks",),
    "num_cpu_blocks": ("blocks",),
    "max_num_batched_tokens": ("batched",),
    "tried_to_allocate_gib": ("allocate",),
    "kv_needed_gib": ("kv cache",),
    "kv_available_gib": ("kv", "缓存"),
    "weights_gib": ("weight", "loading", "权重"),
    "requested_gib": ("request", "requir", "desired", "ask", "need", "要求", "需要"),
    "this_process_gib": ("process", "vllm", "in use", "used", "占用"),
    "free_gib": ("free", "available", "left", "剩余", "可用", "空闲"),
    "total_gib": ("total", "capacity", "vram", "gpu", "card", "free", "available", "left", "显存", "总"),
}
Words = list[tuple[Quantity, re.Pattern, tuple[str, ...]]]
WORDS: Words = [(q, _words("|".join(patterns)), _GATES[q.name]) for q, patterns in _PROSE.items()]
MEMORY_WORDS: Words = [(q, _words("|".join(patterns)), _GATES[q.name]) for q, patterns in _MEMORY.items()]
BY_NAME = {quantity.name: quantity for quantity in [*_ALIASES, *_PROSE, *_MEMORY]}
# the words that may follow a size and name it ("3.1 GiB free", "20.6 GiB in use", "24 GB VRAM")
MEMORY_AFTER = {
    "free_gib": _words(r"free|available|left|剩余|可用|空闲"),
    "this_process_gib": _words(r"(?:memory )?in use|used|占用"),
    "total_gib": _words(r"total|VRAM|of (?:GPU )?memory|显存"),
}
_KINDS = {"%": ("percent", "fraction"), "ms": ("ms",), "s": ("ms",), "x": ("float",)}


def kind_of(unit: str | None) -> tuple[str, ...]:
    """The kinds of quantity a number with this unit can be."""
    if unit is None or unit.startswith("token") or unit.startswith("req"):
        return ("int", "float", "fraction")
    return _KINDS.get(unit, ("gib",))
