"""The quantities diagnose reads, each under vLLM's name, with the keys people give it: flags, config keys, request
fields, metric names, the aliases of other servers, clients, trainers and harnesses. A key's `-`, `--`, case,
dotted path, `vllm_` prefix and Prometheus form (`vllm:num_preemptions_total`, `..._seconds`) do not matter
(keys.normal_key). The words of prose that name them are in words.py."""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    name: str
    kind: str  # int | float | fraction (0-1) | percent | gib | ms | str | bool


BY_NAME: dict[str, Quantity] = {}


def _q(name: str, kind: str = "int") -> Quantity:
    return BY_NAME.setdefault(name, Quantity(name, kind))


MAX_MODEL_LEN, MAX_TOKENS, PROMPT_TOKENS = _q("max_model_len"), _q("max_tokens"), _q("prompt_tokens")
COMPLETION_TOKENS, UTILIZATION = _q("completion_tokens"), _q("gpu_memory_utilization", "fraction")
KV_USAGE, RUNNING, WAITING = _q("kv_cache_usage_percent", "percent"), _q("num_running"), _q("num_waiting")
CONCURRENCY, TPOT, TTFT = _q("concurrency"), _q("tpot_ms", "ms"), _q("ttft_ms", "ms")
BLOCKS, BATCHED, PREEMPTIONS = _q("num_gpu_blocks"), _q("max_num_batched_tokens"), _q("num_preemptions")
TOTAL_GIB = _q("total_gib", "gib")

_ALIASES: dict[Quantity, tuple[str, ...]] = {
    MAX_MODEL_LEN: ("max_model_len", "max_seq_len", "max_model_length", "max_seq_length", "vllm_maxlen",
                    "model_max_len", "max_total_tokens", "n_ctx", "num_ctx", "ctx_size", "context_length",
                    "context_len", "max_context_length", "max_context_len"),
    # an OpenAI request's, other servers', clients' (LangChain, LlamaIndex), harnesses' (lm-eval, OpenCompass,
    # lighteval) and trainers' (TRL) names for the output cap
    MAX_TOKENS: ("max_tokens", "max_completion_tokens", "max_new_tokens", "n_predict", "num_predict", "max_gen_toks",
                 "max_output_tokens", "max_tokens_to_sample", "max_length_generation", "max_out_len",
                 "max_completion_length", "generation_size", "max_gen_len"),
    PROMPT_TOKENS: ("prompt_tokens", "input_tokens", "num_prompt_tokens", "prompt_len", "prompt_length",
                    "input_len", "input_length", "num_tokens", "prompt_token_count", "input_token_count",
                    "random_input_len"),
    COMPLETION_TOKENS: ("completion_tokens", "output_tokens", "generated_tokens", "num_generated_tokens",
                        "output_len", "completion_token_count", "random_output_len", "sharegpt_output_len"),
    _q("requested_tokens"): ("total_tokens_requested",),
    _q("total_tokens"): ("total_tokens",),  # a usage block's prompt + completion
    UTILIZATION: ("gpu_memory_utilization", "gpu_memory_utilisation", "gpu_util", "gpu_mem_util",
                  "mem_fraction_static", "gpu_memory_fraction"),
    _q("block_size"): ("block_size",),
    _q("kv_cache_dtype", "str"): ("kv_cache_dtype",),
    _q("tensor_parallel_size"): ("tensor_parallel_size", "tp", "tp_size", "tensor_parallel",
                                 "tensor_model_parallel_size"),
    _q("pipeline_parallel_size"): ("pipeline_parallel_size", "pp", "pp_size", "pipeline_parallel"),
    _q("max_num_seqs"): ("max_num_seqs", "max_batch_size", "max_running_requests"),
    BATCHED: ("max_num_batched_tokens", "max_batch_prefill_tokens", "chunked_prefill_size"),
    _q("max_num_scheduled_tokens"): ("max_num_scheduled_tokens",),
    _q("kv_cache_tokens"): ("kv_cache_tokens", "kv_tokens", "gpu_kv_cache_size", "kv_cache_size_tokens"),
    _q("num_speculative_tokens"): ("num_speculative_tokens", "num_draft_tokens"),
    _q("max_prompt_length"): ("max_prompt_length",),
    _q("max_response_length"): ("max_response_length",),
    _q("n"): ("n",),
    BLOCKS: ("num_gpu_blocks", "gpu_blocks", "num_gpu_blocks_override"),
    KV_USAGE: ("kv_cache_usage", "gpu_cache_usage", "kv_cache_usage_perc", "gpu_cache_usage_perc",
               "gpu_kv_cache_usage", "kv_usage"),
    RUNNING: ("running", "num_running", "num_requests_running", "running_reqs"),
    WAITING: ("waiting", "pending", "num_waiting", "num_requests_waiting", "pending_reqs", "waiting_reqs"),
    _q("num_swapped"): ("swapped", "num_swapped", "num_requests_swapped"),
    CONCURRENCY: ("max_concurrency", "concurrency", "num_concurrent_requests", "parallel_requests", "num_concurrent"),
    _q("num_prompts"): ("num_prompts",),
    TPOT: ("tpot", "mean_tpot_ms", "median_tpot_ms", "tpot_ms", "itl", "mean_itl_ms", "time_per_output_token",
           "inter_token_latency", "request_time_per_output_token"),
    TTFT: ("ttft", "mean_ttft_ms", "median_ttft_ms", "ttft_ms", "time_to_first_token"),
    PREEMPTIONS: ("total_num_cumulative_preemption", "num_preemptions", "num_preemption", "preemptions",
                  "total_cumulative_preemption_cnt", "num_preemptions_total"),
    _q("preemptions_per_s", "float"): (),  # a rate() of the preemption counter
    # a trainer's share of completions that reached the cap (TRL's, verl's and OpenRLHF's metrics), and the longest
    _q("clipped_ratio", "fraction"): ("clipped_ratio", "clip_ratio", "completions_clipped_ratio",
                                      "response_length_clip_ratio", "response_clip_ratio"),
    _q("longest_completion"): ("completions_max_length", "response_length_max", "generate_length_max"),
    _q("priority"): ("priority",),
    _q("finish_reason", "str"): ("finish_reason",),
    # requests vLLM counted as finished for each reason (vllm:request_success_total's finished_reason label)
    _q("requests_finished_length", "float"): (),
    _q("requests_finished_stop", "float"): (),
    _q("requests_finished_abort", "float"): (),
    # vLLM's histogram of tokens generated per request: their sum, and the requests it counted
    _q("generation_tokens_sum", "float"): ("request_generation_tokens_sum",),
    _q("generation_requests", "float"): ("request_generation_tokens_count",),
    _q("max_tokens_histogram", "float"): (),
    # production-stack's Helm values name it modelURL; KServe's Hugging Face runtime model_id (its model_name is
    # the served name)
    _q("model", "str"): (
        "model", "model_path", "model_name_or_path", "pretrained", "model_name", "model_url", "model_id",
    ),
    _q("served_model_name", "str"): ("served_model_name",),
    _q("dtype", "str"): ("dtype", "torch_dtype"),
    _q("enforce_eager", "bool"): ("enforce_eager",),
    _q("enable_chunked_prefill", "bool"): ("enable_chunked_prefill",),
    _q("cpu_offload_gb", "gib"): ("cpu_offload_gb",),
    TOTAL_GIB: ("total_gpu_memory", "total_memory", "gpu_total_memory", "memory_total"),
    _q("gpu_used_gib", "gib"): ("memory_used",),  # what the GPU has in use: nvidia-smi --query-gpu=memory.used
    _q("initial_memory_usage_gib", "gib"): ("initial_memory_usage",),
    _q("num_cpu_blocks"): ("num_cpu_blocks", "cpu_blocks"),
    _q("process_gib", "gib"): ("used_memory", "used_gpu_memory"),  # a process's memory, as nvidia-smi lists it
}  # fmt: skip
KEYS = {alias: quantity for quantity, aliases in _ALIASES.items() for alias in aliases}
# a quantity of the server's own default: max_tokens in vLLM's "Using default chat sampling params from model: {...}"
# (the model's generation_config.json, a hard cap on 0.8 - 0.15)
SERVER_MAX_TOKENS = _q("server_max_tokens")
_KINDS = {"%": ("percent", "fraction"), "ms": ("ms",), "s": ("ms",), "x": ("float",)}


def kind_of(unit: str | None) -> tuple[str, ...]:
    """The kinds of quantity a number with this unit can be."""
    if unit is None or unit.startswith("token") or unit.startswith("req"):
        return ("int", "float", "fraction")
    return _KINDS.get(unit, ("gib",))


def words(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)
