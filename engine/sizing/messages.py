"""Every memory and length message kvtool raises, defined once, in vLLM's words.

The engine, `serve` and `plan` raise these; `kvtool diagnose` recognises each of them (a round-trip
test formats every template and diagnoses the result). Each template names the vLLM release whose
wording it keeps; placeholders are str.format fields.
"""

from kvtool.engine.sizing.units import format_gib

CONSERVING_MEMORY_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"

# Request length (HTTP 400), vLLM 0.33 unless said otherwise. `at_least` is "at least " when the
# tokenizer stopped one token past the limit (text prompts), else "". The server adds the
# " (parameter=..., value=...)" suffix of with_parameter(), as vLLM's validation errors do.
PROMPT_TOO_LONG = (
    "This model's maximum context length is {max_model_len} tokens. However, your prompt contains "
    "{at_least}{prompt_tokens} input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt."
)
PROMPT_CHARS_TOO_LONG = (
    "This model's maximum context length is {max_model_len} tokens. However, your prompt contains {prompt_chars} "
    "characters (more than {max_input_chars} characters, which is the upper bound for {max_input_tokens} input "
    "tokens). Please reduce the length of the input prompt."
)
NO_ROOM_FOR_OUTPUT = (
    "The decoder prompt (length {prompt_tokens}) plus the number of requested output tokens (at least 1) is longer "
    "than the maximum model length of {max_model_len}. Make sure that `max_model_len` is no smaller than the number "
    "of text tokens (prompt + requested output tokens)."
)
MAX_TOKENS_TOO_LARGE = (  # vLLM 0.31+
    "{param}={max_tokens} cannot be greater than max_model_len={max_model_len}. Please request fewer output tokens."
)
TOTAL_TOO_LONG = (  # vLLM 0.18 - 0.31, the `reject` overflow policy
    "This model's maximum context length is {max_model_len} tokens. However, you requested {max_tokens} output "
    "tokens and your prompt contains {at_least}{prompt_tokens} input tokens, for a total of {at_least}{total_tokens} "
    "tokens. Please reduce the length of the input prompt or the number of requested output tokens."
)
TOTAL_CHARS_TOO_LONG = (  # vLLM 0.18 - 0.31, the `reject` overflow policy
    "This model's maximum context length is {max_model_len} tokens. However, you requested {max_tokens} output "
    "tokens and your prompt contains {prompt_chars} characters (more than {max_input_chars} characters, which is the "
    "upper bound for {max_input_tokens} input tokens). Please reduce the length of the input prompt or the number of "
    "requested output tokens."
)
MAX_TOKENS_BELOW_ONE = "max_tokens must be at least 1, got {max_tokens}."

# Request routing (HTTP 404), vLLM 0.33.
MODEL_NOT_FOUND = "The model `{model}` does not exist. Valid aliases: {aliases}."


def with_parameter(message: str, parameter: str | None = None, value=None) -> str:
    """vLLM's validation-error text: the message, then " (parameter=..., value=...)" for what is known."""
    extras = [f"{name}={v}" for name, v in (("parameter", parameter), ("value", value)) if v is not None]
    return f"{message} ({', '.join(extras)})" if extras else message


# Start-up (the engine refuses to start), vLLM 0.33.
NO_MEMORY_FOR_CACHE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine "
    "(this flag also controls CPU memory reservation on the CPU backend, despite its name). See {url} for more "
    "details."
)
KV_CACHE_TOO_SMALL = (
    "To serve at least one request with the model's max seq len ({max_model_len}), ({needed_gib} GiB KV cache is "
    "needed, which is larger than the available KV cache memory ({available_gib} GiB). Based on the available memory, "
    "the estimated maximum model length is {estimate}. Try increasing `gpu_memory_utilization` (which also controls "
    "CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See {url} for more "
    "details."
)
MAX_MODEL_LEN_OVER_DERIVED = (
    "User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
    "(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow overriding this "
    "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
    "caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to "
    "nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
    "array out-of-bounds error."
)
BATCHED_TOKENS_BELOW_MODEL_LEN = (
    "max_num_batched_tokens ({max_num_batched_tokens}) is smaller than max_model_len ({max_model_len}). This "
    "effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
    "Please increase max_num_batched_tokens or decrease max_model_len."
)
BATCHED_TOKENS_BELOW_NUM_SEQS = (
    "max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal to max_num_seqs ({max_num_seqs})."
)
FREE_MEMORY_BELOW_UTILIZATION = (
    "Free memory on device {device} ({free_gib}/{total_gib} GiB) on startup is less than desired GPU memory "
    "utilization ({gpu_memory_utilization}, {requested_gib} GiB). Decrease GPU memory utilization or reduce GPU "
    "memory used by other processes."
)
CANNOT_AUTO_FIT = (
    "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing "
    "`gpu_memory_utilization`."
)

# The start-up log line, vLLM 0.30+.
KV_CACHE_SIZE_LOG = (
    "{device} KV cache size: {kv_cache_tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens per "
    "request: {max_concurrency:.2f}x"
)


def kv_cache_too_small(max_model_len: int, needed_bytes: int, available_bytes: int, estimate: int) -> str:
    return KV_CACHE_TOO_SMALL.format(max_model_len=max_model_len, needed_gib=format_gib(needed_bytes),
                                     available_gib=format_gib(available_bytes), estimate=estimate,
                                     url=CONSERVING_MEMORY_URL)


def kv_cache_size_log(kv_cache_tokens: int, max_model_len: int, max_concurrency: float, device: str = "GPU") -> str:
    return KV_CACHE_SIZE_LOG.format(device=device, kv_cache_tokens=kv_cache_tokens, max_model_len=max_model_len,
                                    max_concurrency=max_concurrency)


def no_memory_for_cache() -> str:
    return NO_MEMORY_FOR_CACHE.format(url=CONSERVING_MEMORY_URL)
