"""Every wording vLLM used, 0.2.0 to 0.34.0, for the memory and length failures, and kvtool's own
messages: one place, as data. Each wording is the template vLLM formats (placeholders named as the
numbers diagnose reports), the releases whose source holds that exact text, and the file it is
raised from. patterns.py derives each recogniser's regex from its template; the test corpus renders
each template to check that it is recognised.

Placeholders are numbers, except the TEXT ones (a parameter name, a device, a URL) and `qualifier`
(vLLM prints "at least " before a count it did not finish measuring, or nothing).
"""

from dataclasses import dataclass, field

from kvtool.engine.sizing import messages


@dataclass(frozen=True)
class Wording:
    category: str
    template: str
    versions: str  # "0.4.3-0.10.2", or "kvtool" for kvtool's own messages
    source: str  # the file (and function) in that release range
    stage: str = "request"
    regex: str | None = None  # when the layout varies too much for a template (stats lines)
    detail: str | None = None  # a fixed detail for the explainer (the warm-up kind)
    constants: dict = field(default_factory=dict)  # numbers the wording implies without printing them


FRONT = "in front of vLLM"  # the versions of a wording a server in front of vLLM prints
PROMPT_LIMIT = "prompt limit"  # the v0 scheduler's limit: max_model_len or max_num_batched_tokens
MULTIMODAL_PROFILING = "multimodal profiling"
SPECULATIVE = "speculative decoding"
STATS_LINE = "stats line"  # the periodic stats line: whether the cache is under pressure is read from it all


def _length(template: str, versions: str, source: str, **kw) -> Wording:
    return Wording("request_too_long", template, versions, source, **kw)


_CONTEXT = "This model's maximum context length is {max_model_len} tokens. However, "
_SERVING = "entrypoints/openai/serving_engine.py _validate_input"
_PARAMS = "renderers/params.py"
_REDUCE_BOTH = " Please reduce the length of the input prompt or the number of requested output tokens."
_CHARS = (
    "{prompt_characters} characters (more than {max_input_characters} characters, which is the upper bound for "
    "{max_input_tokens} input tokens)."
)

REQUEST_TOO_LONG = [
    _length(
        _CONTEXT + "you requested {requested_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion.",
        "0.2.0-0.10.0",
        "entrypoints/openai/api_server.py check_length (0.2), then " + _SERVING,
    ),
    _length(
        _CONTEXT + "you requested {prompt_tokens} tokens in the messages, Please reduce the length of the messages.",
        "0.4.1-0.10.0",
        _SERVING + " (max_tokens not set)",
    ),
    _length(
        _CONTEXT + "you requested {prompt_tokens} tokens in the input for embedding generation. Please reduce the "
        "length of the input.",
        "0.4.3-0.6.6.post1, 0.10.1-0.17.1",
        _SERVING + ", then serving_embedding.py",
    ),
    _length(
        _CONTEXT + "you requested {prompt_tokens} tokens in the input for {operation}. Please reduce the length of "
        "the input.",
        "0.7.0-0.18.1",
        _SERVING + " (pooling, score)",
    ),
    _length(
        _CONTEXT + "you requested {prompt_tokens} tokens in the input for {operation}. Please reduce the length of "
        "the input prompt.",
        "0.19.0-0.19.1",
        "entrypoints/openai/engine/serving.py",
    ),
    _length(
        "'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context length is "
        "{max_model_len} tokens and your request has {prompt_tokens} input tokens ({max_tokens} > {max_model_len} - "
        "{prompt_tokens}).",
        "0.10.1-0.17.1",
        _SERVING,
    ),
    _length(
        _CONTEXT + "your request has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
        "0.10.1-0.19.1",
        _SERVING + "; entrypoints/renderer.py _create_tokens_prompt 0.11.0-0.15.1",
    ),
    _length(
        "This maximum context length is {max_model_len} tokens. However, your request has {prompt_tokens} input "
        "tokens. Please reduce the length of the input messages.",
        "0.10.2",
        "entrypoints/renderer.py _create_tokens_prompt (the number is max_model_len - max_tokens)",
    ),
    _length(
        "'max_tokens' ({max_tokens}) cannot be greater than the model's maximum context length ({max_model_len}).",
        "0.14.0-0.15.1",
        "entrypoints/openai/serving_completion.py _build_render_config",
    ),
    _length(
        "You passed {prompt_tokens} input tokens and requested {max_tokens} output tokens. However, the model's "
        "context length is only {max_model_len} tokens, resulting in a maximum input length of {max_input_tokens} "
        "tokens. Please reduce the length of the input prompt.",
        "0.16.0-0.17.1",
        _PARAMS + " _token_len_check",
    ),
    _length(
        "You passed {prompt_characters} input characters and requested {max_tokens} output tokens. However, the "
        "model's context length is only {max_model_len} tokens, resulting in a maximum input length of "
        "{max_input_tokens} tokens (at most {max_input_characters} characters). Please reduce the length of the "
        "input prompt.",
        "0.16.0-0.17.1",
        _PARAMS + " _text_len_check",
    ),
    _length(
        "{param}={max_tokens}cannot be greater than max_model_len=max_total_tokens={max_model_len}. Please request "
        "fewer output tokens.",
        "0.16.0-0.19.1",
        _PARAMS + " TokenizeParams.__post_init__",
    ),
    _length(
        "{param}={max_tokens} cannot be greater than max_model_len=max_total_tokens={max_model_len}. Please request "
        "fewer output tokens.",
        "0.20.0-0.30.0",
        _PARAMS + " TokenizeParams.__post_init__",
    ),
    _length(
        "{param}={max_tokens} cannot be greater than max_model_len={max_model_len}. Please request fewer output "
        "tokens.",
        "0.31.0-0.34.0",
        _PARAMS + " TokenizeParams.__post_init__",
    ),
    _length(
        _CONTEXT + "you requested {max_tokens} output tokens and your prompt contains {prompt_tokens} input tokens, "
        "for a total of {requested_tokens} tokens ({prompt_tokens} + {max_tokens} = {requested_tokens} > "
        "{max_model_len})." + _REDUCE_BOTH,
        "0.18.0-0.19.1",
        "entrypoints/openai/engine/serving.py _validate_input",
    ),
    _length(
        _CONTEXT + "you requested {max_tokens} output tokens and your prompt contains {qualifier}{prompt_tokens} "
        "input tokens, for a total of {qualifier}{requested_tokens} tokens." + _REDUCE_BOTH,
        "0.18.0-0.31.0",
        _PARAMS + " _token_len_check",
    ),
    _length(
        _CONTEXT + "you requested {max_tokens} output tokens and your prompt contains " + _CHARS + _REDUCE_BOTH,
        "0.18.0-0.31.0",
        _PARAMS + " _text_len_check",
    ),
    _length(
        _CONTEXT + "your prompt contains {qualifier}{prompt_tokens} input tokens, which exceeds this limit even "
        "without any output tokens. Please reduce the length of the input prompt.",
        "0.32.0-0.34.0",
        _PARAMS + " _token_len_check",
    ),
    _length(
        _CONTEXT + "your prompt contains " + _CHARS + " Please reduce the length of the input prompt.",
        "0.32.0-0.34.0",
        _PARAMS + " _text_len_check",
    ),
    _length(
        "Input length ({prompt_tokens}) exceeds model's maximum context length ({max_model_len}).",
        "0.18.0-0.34.0",
        "entrypoints/utils.py, then entrypoints/serve/utils/api_utils.py get_max_tokens",
    ),
    _length(
        "The engine prompt length {prompt_tokens} exceeds the max_model_len {max_model_len}. Please reduce prompt.",
        "0.11.1-0.34.0",
        "entrypoints/openai/serving_responses.py _validate_generator_input",
    ),
    _length(
        "The prompt (total length {prompt_tokens}) is too long to fit into the model (context length "
        "{max_model_len}). Make sure that `max_model_len` is no smaller than the number of text tokens plus "
        "multimodal tokens.",
        "0.6.0-0.8.3",
        "engine/llm_engine.py and v1/engine/processor.py _validate_model_inputs",
    ),
    _length(
        "The {prompt_type} prompt (length {prompt_tokens}) is longer than the maximum model length of "
        "{max_model_len}. Make sure that `max_model_len` is no smaller than the number of text tokens.",
        "0.8.4-0.34.0",
        "v1/engine/processor.py, then v1/engine/input_processor.py (0.12+)",
    ),
    _length(
        "The {prompt_type} prompt (length {prompt_tokens}) plus the number of requested output tokens (at least 1) "
        "is longer than the maximum model length of {max_model_len}. Make sure that `max_model_len` is no smaller "
        "than the number of text tokens (prompt + requested output tokens).",
        "0.11.1-0.34.0",
        "v1/engine/processor.py, then v1/engine/input_processor.py",
    ),
    _length(
        "Input prompt ({prompt_tokens} tokens) is too long and exceeds limit of {prompt_limit}",
        "0.2.0-0.10.2",
        "core/scheduler.py _schedule / _schedule_prefills (a WARNING; the request ends with finish_reason length; "
        "the limit is max_model_len with chunked prefill on and no multi-step scheduling, else "
        "min(max_model_len, max_num_batched_tokens))",
        detail=PROMPT_LIMIT,
    ),
    _length(
        "Input prompt ({prompt_tokens} tokens) is too long and exceeds the capacity of block_manager",
        "0.2.3-0.6.2",
        "core/scheduler.py (a WARNING)",
        constants={"lookahead_slots": 0},
    ),
    _length(
        "Input prompt ({prompt_tokens} tokens) + lookahead slots ({lookahead_slots}) is too long and exceeds the "
        "capacity of block_manager",
        "0.6.3-0.10.2",
        "core/scheduler.py _schedule_prefills (a WARNING)",
    ),
    _length("max_tokens must be at least 1, got {max_tokens}.", "0.2.0-0.34.0", "sampling_params.py _verify_args"),
    _length(
        _CONTEXT + "your request has {prompt_tokens} input tokens plus {max_tokens} 'max_tokens'.",
        FRONT,
        "a gateway's own check of the same rule, worded after vLLM's",
    ),
    _length(
        "truncate_prompt_tokens ({truncate_prompt_tokens}) cannot be greater than max_length ({max_input_tokens}). "
        "Please select a smaller truncation size.",
        "0.10.2-0.11.0",
        "entrypoints/renderer.py",
    ),
    _length(
        "truncate_prompt_tokens={truncate_prompt_tokens} cannot be greater than max_length={max_input_tokens}. "
        "Please select a smaller truncation size.",
        "0.11.1-0.15.1",
        "entrypoints/renderer.py",
    ),
    _length(
        "{tp_param}={truncate_prompt_tokens} cannot be greater than max_model_len - {param} = {max_input_tokens}. "
        "Please request a smaller truncation size.",
        "0.16.0-0.31.0",
        _PARAMS,
    ),
    _length(
        "{tp_param}={truncate_prompt_tokens} cannot be greater than max_model_len = {max_input_tokens}. Please "
        "request a smaller truncation size.",
        "0.32.0-0.34.0",
        _PARAMS,
    ),
]

_KV = "kv_cache_too_small_at_startup"
_TRY = " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
_TRY_CPU = (
    " Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
    "`max_model_len` when initializing the engine."
)
_SEE = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
_SERVE_ONE = (
    "To serve at least one request with the {spelling} max seq len ({max_model_len}), ({kv_needed_gib} {unit} KV "
    "cache is needed, which is larger than the available KV cache memory ({kv_available_gib} {unit})."
)
_ESTIMATE = " Based on the available memory, the estimated maximum model length is {estimated_max_model_len}."
_UTILS = "v1/core/kv_cache_utils.py check_enough_kv_cache_memory"


def _kv(text: str, versions: str, source: str = _UTILS, category: str = _KV) -> Wording:
    return Wording(category, text, versions, source, stage="startup")


def _serve_one(spelling: str, unit: str) -> str:
    return _SERVE_ONE.replace("{spelling}", spelling).replace("{unit}", unit)


KV_STARTUP = [
    _kv(
        "The model's max seq len ({max_model_len}) is larger than the maximum number of tokens that can be stored "
        "in KV cache ({kv_cache_tokens})." + _TRY,
        "0.2.7-0.10.2",
        "engine/llm_engine.py _init_cache, then worker/worker.py raise_if_cache_size_invalid (also the CPU worker)",
    ),
    _kv(_serve_one("models's", "GB") + _TRY, "0.7.0-0.8.2"),
    _kv(_serve_one("models's", "GiB") + _TRY, "0.8.3"),
    _kv(
        _serve_one("models's", "GiB") + " Based on the available memory, " + _TRY,
        "0.8.4-0.9.0.1",
        _UTILS + " (the estimate sentence is cut short)",
    ),
    _kv(_serve_one("models's", "GiB") + _ESTIMATE + _TRY, "0.9.1-0.12.0"),
    _kv(_serve_one("models's", "GiB") + _ESTIMATE + _TRY + _SEE, "0.13.0-0.20.2"),
    _kv(
        _serve_one("model's", "GiB") + _ESTIMATE + _TRY_CPU + _SEE,
        "0.22.0-0.34.0",
        _UTILS + ", then v1/core/kv_cache_planning.py (0.33)",
    ),
    _kv(
        "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing "
        "`gpu_memory_utilization`.",
        "0.14.0-0.34.0",
        "v1/core/kv_cache_utils.py _auto_fit_max_model_len",
        category="no_cache_blocks",
    ),
]

_NO_BLOCKS = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine"
)
NO_CACHE_BLOCKS = [
    _kv(
        _NO_BLOCKS + ".",
        "0.2.0-0.12.0",
        "engine/llm_engine.py _init_cache, worker/worker.py, then " + _UTILS,
        category="no_cache_blocks",
    ),
    _kv(
        _NO_BLOCKS.replace("`gpu_memory_utilization`", "`VLLM_CPU_KVCACHE_SPACE`") + ".",
        "0.4.0.post1-0.9.2",
        "worker/cpu_worker.py _validate_num_cpu_blocks",
        category="no_cache_blocks",
    ),
    _kv(_NO_BLOCKS + "." + _SEE, "0.13.0-0.20.2", _UTILS, category="no_cache_blocks"),
    _kv(
        _NO_BLOCKS + " (this flag also controls CPU memory reservation on the CPU backend, despite its name)." + _SEE,
        "0.22.0-0.34.0",
        _UTILS + ", then v1/core/kv_cache_planning.py",
        category="no_cache_blocks",
    ),
]

_HELD = "gpu_memory_held_by_others"
_CLEANED = " This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance."
_FREE = "Free memory on device{device} ({free_gib}/{total_gib} GiB) on startup is less than "
_DECREASE = " Decrease GPU memory utilization or reduce GPU memory used by other processes."
HELD_BY_OTHERS = [
    _kv(
        "Error in memory profiling." + _CLEANED,
        "0.4.0-0.5.3.post1",
        "worker/worker.py determine_num_available_blocks",
        category=_HELD,
    ),
    _kv(
        "Error in memory profiling. Initial free memory {initial_free_bytes}, current free memory {current_free_bytes}."
        + _CLEANED,
        "0.5.4-0.9.0.1",
        "worker/worker.py, v1/worker/gpu_worker.py (bytes)",
        category=_HELD,
    ),
    _kv(
        "Error in memory profiling. Initial used memory {initial_used_bytes}, currently used memory "
        "{current_used_bytes}." + _CLEANED,
        "0.7.0-0.10.2",
        "worker/worker.py _assert_memory_footprint_increased_during_profiling",
        category=_HELD,
    ),
    _kv(
        "Error in memory profiling. Initial free memory {initial_free_gib} GiB, current free memory {current_free_gib} "
        "GiB. This happens when other processes sharing the same container release GPU memory while vLLM is profiling "
        "during initialization.",
        "0.9.1-0.34.0",
        "v1/worker/gpu_worker.py determine_available_memory",
        category=_HELD,
    ),
    _kv(
        _FREE.replace("{device}", "")
        + "desired GPU memory utilization ({gpu_memory_utilization}, {requested_gib} GiB)."
        + _DECREASE,
        "0.9.1-0.13.0",
        "v1/worker/gpu_worker.py init_device",
        category=_HELD,
    ),
    _kv(
        _FREE.replace("{device}", " {device}") + "desired GPU memory utilization ({gpu_memory_utilization}, "
        "{requested_gib} GiB)." + _DECREASE,
        "0.14.0-0.34.0",
        "v1/worker/utils.py request_memory",
        category=_HELD,
    ),
    _kv(
        _FREE.replace("{device}", " {device}") + "the engine's budget after excluding external process's weights "
        "({gpu_memory_utilization}, {requested_gib} GiB)." + _DECREASE,
        "0.32.0-0.34.0",
        "v1/worker/utils.py request_memory (weights held by another process excluded)",
        category=_HELD,
    ),
]

_WARM_UP = " Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
OOM_STARTUP = [
    Wording(
        "cuda_oom_startup",
        "CUDA out of memory occurred when warming up sampler with {dummy_requests} dummy requests." + _WARM_UP,
        "0.8.0-0.33.0",
        "v1/worker/gpu_model_runner.py _dummy_sampler_run",
        "startup",
        detail="sampler",
    ),
    Wording(
        "cuda_oom_startup",
        "CUDA out of memory occurred when warming up pooler with {dummy_requests} dummy requests." + _WARM_UP,
        "0.9.2",
        "v1/worker/gpu_model_runner.py _dummy_pooler_run",
        "startup",
        detail="pooler",
    ),
    Wording(
        "cuda_oom_startup",
        "CUDA out of memory occurred when warming up pooler ({task}) with {dummy_requests} dummy requests." + _WARM_UP,
        "0.10.0-0.34.0",
        "v1/worker/gpu_model_runner.py _dummy_pooler_run_task",
        "startup",
        detail="pooler",
    ),
]

_STATS = "Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 500.0 tokens/s, "
_USAGE = r"(?P<device>GPU|CPU|XPU|TPU)? ?KV cache usage: (?P<kv_cache_usage_percent>[\d.]+)%"
NEAR_FULL_REGEX = (
    r"Running: (?P<num_running>\d+) reqs,? (?:Swapped: (?P<num_swapped>\d+) reqs, )?(?:Pending|Waiting): "
    r"(?P<num_waiting>\d+) reqs,?[^%]{0,120}?"
    + _USAGE
    + r"(?:,? Prefix cache hit rate: (?P<prefix_cache_hit_rate_percent>[\d.]+)%)?"
    + r"(?:,? CPU KV cache usage: (?P<cpu_kv_cache_usage_percent>[\d.]+)%)?"
)
PREEMPTIONS_REGEX = r"Running: (?P<num_running>\d+) reqs,[^%]{0,200}?Preemptions: (?P<num_preemptions>\d+)"
_STATS_SOURCE = "the periodic stats line: engine/metrics.py (v0), v1/metrics/loggers.py (v1)"
STATS_LINES = [  # one per layout; each is read for a full cache (and, where printed, preemptions)
    Wording(
        "kv_cache_near_full",
        _STATS + "Running: {num_running} reqs, Swapped: 0 reqs, Pending: {num_waiting} reqs, "
        "GPU KV cache usage: {kv_cache_usage_percent}%, CPU KV cache usage: 0.0%",
        "0.2.0-0.4.2",
        _STATS_SOURCE,
        "runtime",
        regex=NEAR_FULL_REGEX,
        detail=STATS_LINE,
    ),
    Wording(
        "kv_cache_near_full",
        _STATS + "Running: {num_running} reqs, Swapped: 0 reqs, Pending: {num_waiting} reqs, "
        "GPU KV cache usage: {kv_cache_usage_percent}%, CPU KV cache usage: 0.0%.",
        "0.4.3-0.11.0",
        _STATS_SOURCE,
        "runtime",
        regex=NEAR_FULL_REGEX,
        detail=STATS_LINE,
    ),
    Wording(
        "kv_cache_near_full",
        _STATS + "Running: {num_running} reqs, Waiting: {num_waiting} reqs GPU KV cache usage: "
        "{kv_cache_usage_percent}%.",
        "0.7.1-0.7.2",
        _STATS_SOURCE,
        "runtime",
        regex=NEAR_FULL_REGEX,
        detail=STATS_LINE,
    ),
    Wording(
        "kv_cache_near_full",
        _STATS + "Running: {num_running} reqs, Waiting: {num_waiting} reqs, GPU KV cache usage: "
        "{kv_cache_usage_percent}%, Prefix cache hit rate: 0.0%",
        "0.7.3-0.11.0",
        _STATS_SOURCE,
        "runtime",
        regex=NEAR_FULL_REGEX,
        detail=STATS_LINE,
    ),
    Wording(
        "preemption",
        "Engine 000: " + _STATS + "Running: {num_running} reqs, Waiting: 3 reqs, Preemptions: "
        "{num_preemptions}, GPU KV cache usage: 80.0%, Prefix cache hit rate: 0.0%",
        "0.11.1-0.29.0",
        _STATS_SOURCE,
        "runtime",
        regex=PREEMPTIONS_REGEX,
    ),
    Wording(
        "preemption",
        "Engine 000: " + _STATS + "Running: {num_running} reqs, Waiting: 3 reqs, Deferred: 1 reqs, "
        "Preemptions: {num_preemptions}, GPU KV cache usage: 80.0%, Prefix cache hit rate: 0.0%",
        "0.30.0-0.34.0",
        _STATS_SOURCE,
        "runtime",
        regex=PREEMPTIONS_REGEX,
    ),
    Wording(
        "kv_cache_near_full",
        "Engine 000: " + _STATS + "Running: {num_running} reqs, Waiting: {num_waiting} reqs, "
        "GPU KV cache usage: {kv_cache_usage_percent}%, Prefix cache hit rate: 0.0%",
        "0.11.1-0.34.0",
        _STATS_SOURCE,
        "runtime",
        regex=NEAR_FULL_REGEX,
        detail=STATS_LINE,
    ),
]
PREEMPTION = [
    Wording(
        "preemption",
        "Sequence group {request_id} is preempted by {preemption_mode} mode because there is not "
        "enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
        "tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={num_preemptions}",
        "0.4.3-0.10.2",
        "core/scheduler.py _preempt (a WARNING every 50th preemption)",
        "runtime",
        # vLLM's performance guide (0.4.3 to 0.10) quotes the counter as total_cumulative_preemption_cnt
        regex=r"total_(?:num_)?cumulative_preemption(?:_cnt)?=(?P<num_preemptions>\d+)",
    ),
]

_MM = (
    "is too short to hold the multi-modal embeddings in the worst case ({mm_worst_case_tokens} tokens in total, out "
    "of which {mm_placeholders} are reserved for multi-modal embeddings). This may cause certain multi-modal inputs "
    "to fail during inference, even when the input text is short. To avoid this, you should increase "
    "`max_model_len`, reduce `max_num_seqs`, and/or reduce `mm_counts`."
)
_NO_TOKENS = (
    "max_num_scheduled_tokens is set to {max_num_scheduled_tokens} based on the speculative decoding settings, which "
    "does not allow any tokens to be scheduled. Increase max_num_batched_tokens to accommodate the additional draft "
    "token slots, or decrease num_speculative_tokens"
)
BUDGET = [  # one scheduler step (max_num_batched_tokens) too small for what it must hold
    Wording(
        "batched_tokens_lt_model_len",
        "The context length ({profiling_seq_len}) of the model " + _MM,
        "0.6.6.post1-0.7.3",
        "multimodal/processing.py, then multimodal/profiling.py (a WARNING; the length is max_num_batched_tokens / "
        "max_num_seqs, the v0 profiling run's sequence length)",
        "startup",
        detail=MULTIMODAL_PROFILING,
    ),
    Wording(
        "batched_tokens_lt_model_len",
        "The sequence length used for profiling (max_num_batched_tokens / max_num_seqs = {profiling_seq_len}) " + _MM,
        "0.8.5-0.11.0",
        "multimodal/profiling.py get_decoder_dummy_data (and the encoder's, with a double space)",
        "startup",
        detail=MULTIMODAL_PROFILING,
    ),
    Wording(
        "batched_tokens_lt_model_len",
        _NO_TOKENS + " or max_num_seqs.",
        "0.20.0-0.26.0",
        "config/vllm.py _set_max_num_scheduled_tokens (max_num_batched_tokens less the draft slots of max_num_seqs)",
        "startup",
        detail=SPECULATIVE,
    ),
    Wording(
        "batched_tokens_lt_model_len",
        _NO_TOKENS + ".",
        "0.28.0-0.34.0",
        "config/vllm.py _set_max_num_scheduled_tokens",
        "startup",
        detail=SPECULATIVE,
    ),
]

MULTIMODAL_ITEM = "multimodal item"
BUDGET.append(
    Wording(
        "batched_tokens_lt_model_len",
        "Chunked MM input disabled but max_tokens_per_mm_item ({max_tokens_per_mm_item}) is larger than "
        "max_num_batched_tokens ({max_num_batched_tokens}). Please increase max_num_batched_tokens.",
        "0.13.0-0.34.0",
        "v1/core/encoder_cache_manager.py compute_mm_encoder_budget (a model that cannot split one image, video or "
        "audio item over steps; read in 0.13.0 and 0.34.0)",
        "startup",
        detail=MULTIMODAL_ITEM,
    )
)

BATCHED = [
    Wording(
        "batched_tokens_lt_model_len",
        "max_num_batched_tokens ({max_num_batched_tokens}) is smaller than "
        "max_model_len ({max_model_len}). This effectively limits the maximum sequence length to "
        "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
        "decrease max_model_len.",
        "0.2.0-0.34.0",
        "config.py SchedulerConfig._verify_args, then config/scheduler.py verify_max_model_len",
        "startup",
    ),
    Wording(
        "batched_tokens_lt_num_seqs",
        "max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or "
        "equal to max_num_seqs ({max_num_seqs}).",
        "0.2.0-0.34.0",
        "config.py SchedulerConfig._verify_args",
        "startup",
    ),
    Wording(
        "max_model_len_above_derived",
        "User-specified max_model_len ({max_model_len}) is greater than the derived "
        "max_model_len ({derived_key}={derived_max_model_len} or model_max_length=None in model's config.json).",
        "0.4.0-0.34.0",
        "config.py _get_and_verify_max_len",
        "startup",
    ),
]

# kvtool's own messages, recognised from the templates they are raised from.
OWN_CATEGORIES = {
    "PROMPT_TOO_LONG": "request_too_long",
    "NO_ROOM_FOR_OUTPUT": "request_too_long",
    "MAX_TOKENS_TOO_LARGE": "request_too_long",
    "TOTAL_TOO_LONG": "request_too_long",
    "PROMPT_CHARS_TOO_LONG": "request_too_long",
    "TOTAL_CHARS_TOO_LONG": "request_too_long",
    "MAX_TOKENS_BELOW_ONE": "request_too_long",
    "TRUNCATE_PROMPT_TOKENS_TOO_LARGE": "request_too_long",
    "MODEL_NOT_FOUND": "model_not_found",
    "NO_MEMORY_FOR_CACHE": "no_cache_blocks",
    "KV_CACHE_TOO_SMALL": _KV,
    "MAX_MODEL_LEN_OVER_DERIVED": "max_model_len_above_derived",
    "BATCHED_TOKENS_BELOW_MODEL_LEN": "batched_tokens_lt_model_len",
    "BATCHED_TOKENS_BELOW_NUM_SEQS": "batched_tokens_lt_num_seqs",
    "FREE_MEMORY_BELOW_UTILIZATION": _HELD,
    "CANNOT_AUTO_FIT": "no_cache_blocks",
    "MAX_SEQ_LEN_ABOVE_BLOCKS": _KV,
    "KV_CACHE_TOO_SMALL_GB": _KV,
    "KV_CACHE_TOO_SMALL_ESTIMATE": _KV,
    "FREE_MEMORY_BELOW_UTILIZATION_V1": _HELD,
    "WEIGHTS_DO_NOT_FIT": "cuda_oom_startup",
}
OWN = [
    Wording(
        category,
        getattr(messages, name),
        "kvtool",
        f"kvtool.engine.sizing.messages.{name}",
        "request" if category in ("request_too_long", "model_not_found") else "startup",
    )
    for name, category in OWN_CATEGORIES.items()
]

WORDINGS = (
    REQUEST_TOO_LONG
    + KV_STARTUP
    + NO_CACHE_BLOCKS
    + HELD_BY_OTHERS
    + OOM_STARTUP
    + PREEMPTION
    + STATS_LINES
    + BATCHED
    + BUDGET
    + OWN
)
