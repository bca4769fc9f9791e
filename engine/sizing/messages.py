"""The messages kvtool shares with vLLM, in vLLM's words, each written once.

Two kinds live here. The memory and length messages that vLLM prints, which the engine, `serve` and
`plan` raise and `kvtool diagnose` reads back (a round-trip test formats every template and diagnoses
the result). And the request checks vLLM's OpenAI server makes, which the server raises and its tests
compare answers against. Each block names the vLLM source whose wording it keeps; kvtool's own
additions say so. Placeholders are str.format fields.
"""

from kvtool.engine.sizing.units import format_gib

CONSERVING_MEMORY_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"

# Request length (HTTP 400), vLLM 0.33 unless said otherwise. `qualifier` is "at least " when the
# tokenizer stopped one token past the limit (text prompts), else "". The server adds the
# " (parameter=..., value=...)" suffix of with_parameter(), as vLLM's validation errors do.
PROMPT_TOO_LONG = (
    "This model's maximum context length is {max_model_len} tokens. However, your prompt contains "
    "{qualifier}{prompt_tokens} input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt."
)
PROMPT_CHARS_TOO_LONG = (
    "This model's maximum context length is {max_model_len} tokens. However, your prompt contains {prompt_characters} "
    "characters (more than {max_input_characters} characters, which is the upper bound for {max_input_tokens} input "
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
    "tokens and your prompt contains {qualifier}{prompt_tokens} input tokens, for a total of {qualifier}{total_tokens} "
    "tokens. Please reduce the length of the input prompt or the number of requested output tokens."
)
TOTAL_CHARS_TOO_LONG = (  # vLLM 0.18 - 0.31, the `reject` overflow policy
    "This model's maximum context length is {max_model_len} tokens. However, you requested {max_tokens} output "
    "tokens and your prompt contains {prompt_characters} characters (more than {max_input_characters} characters, "
    "which is the upper bound for {max_input_tokens} input tokens). Please reduce the length of the input prompt or "
    "the number of requested output tokens."
)
MAX_TOKENS_BELOW_ONE = "max_tokens must be at least 1, got {max_tokens}."
TRUNCATE_PROMPT_TOKENS_TOO_LARGE = (  # vLLM 0.32+: the prompt may be truncated to max_model_len at most
    "truncate_prompt_tokens={truncate_prompt_tokens} cannot be greater than max_model_len = {max_input_tokens}. "
    "Please request a smaller truncation size."
)

# Request routing (HTTP 404), vLLM 0.33.
MODEL_NOT_FOUND = "The model `{requested_model}` does not exist. Valid aliases: {aliases}."

# The Responses API (vllm/entrypoints/openai/responses/{protocol,serving,utils}.py), vLLM 0.33.
RESPONSE_NOT_FOUND = "Response with id '{response_id}' not found."
RESPONSE_NOT_STREAMED = "Unknown response_id: {response_id}"
CANNOT_CANCEL_SYNCHRONOUS = "Cannot cancel a synchronous response."
BACKGROUND_WITHOUT_STORE = "background can only be used when `store` is true"
BACKGROUND_STORE_DISABLED = (
    "This vLLM engine does not support `store=True` and therefore does not support the background mode. To enable "
    "these features, set the environment variable `VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM server."
)
PROMPT_TEMPLATE_NOT_SUPPORTED = "prompt template is not supported"
STRUCTURED_OUTPUTS_AND_TEXT_FORMAT = "Cannot specify both structured_outputs and text.format"
REQUIRED_WITHOUT_TOOLS = "Tool choice 'required' must be specified with 'tools' parameter."
NAMED_TOOL_NOT_FOUND = "Tool choice 'function' not found in 'tools' parameter."
NAMED_TOOL_AMBIGUOUS = (
    "Tool choice '{name}' is ambiguous: it is defined in more than one namespace ({candidates}). Select it by its "
    "full '<namespace>__<name>' name."
)
INPUT_ITEM_UNSUPPORTED = "Unsupported input item type: {type}"
ENCRYPTED_REASONING = "Encrypted content is not supported."
# kvtool's own: what the embedded engine cannot do with a Responses request.
INPUT_ITEM_INVALID = "Input item {index} ({type}) is invalid: {problem}"
INPUT_PART_NOT_TEXT = (
    "Input item {index} has a content part of type '{type}': kvtool's embedded engine serves text only; send "
    "input_text parts."
)
TOOL_TYPE_NOT_SUPPORTED = (
    "Tool type '{type}' is not supported by kvtool's embedded engine: it runs function tools (and namespaces of "
    "them) only, and no built-in tools."
)
TOOL_PARAMETERS_NOT_OBJECT = "Tool '{name}': parameters must be a JSON Schema object, got {got}."
TOOL_CHOICE_NOT_SUPPORTED = "tool_choice of type '{type}' is not supported: use none, auto, required or a function."

# The Decisions API (vllm/entrypoints/openai/decisions/), vLLM 0.33.
DECISIONS_TEXT_ONLY = "Decisions supports text input only; images are not supported"
DECISIONS_TOO_MANY_QUESTIONS = "questions: at most {limit} for this model"
DECISIONS_TOO_MANY_CHOICES = "This model supports at most {limit} choices per question"
DECISIONS_NAME_NULL = "name must be a string when provided"
DECISIONS_CHOICES_NOT_DISTINCT = "choice values must be distinct"
DECISIONS_JOINT = "joint: this model reads each question on its own; joint reads need DiffusionGemma"
DECISIONS_ENDS_DIFFERENTLY = "these chat options end the prompt differently, so the labels' tokens are unknown"
DECISIONS_NOT_SUPPORTED = "The model does not support the Decisions API"
DECISIONS_LABEL_NOT_ONE_TOKEN = "label {label!r} is not one distinct token after this model's chat prompt"


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
# The same start-up failures as older releases word them.
NO_MEMORY_FOR_CACHE_V0 = (  # 0.2.0 - 0.12 (V0 and V1)
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
)
SHARED_MEMORY_BELOW_MAX_SEQ_LEN = (  # V0 0.2.0 - 0.2.1 (worker.py _check_if_can_support_max_seq_len)
    "vLLM cannot currently support max_model_len={max_model_len} with block_size={block_size} on GPU with compute "
    "capability {capability} (required shared memory {required} > available shared memory {available}). This will "
    "be fixed in a future release."
)
MAX_SEQ_LEN_ABOVE_BLOCKS = (  # V0, 0.2.7 - 0.10.2
    "The model's max seq len ({max_model_len}) is larger than the maximum number of tokens that can be stored in KV "
    "cache ({kv_cache_tokens}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine."
)
KV_CACHE_TOO_SMALL_GB = (  # V1 0.7.0 - 0.8.2 (GB are GiB there)
    "To serve at least one request with the models's max seq len ({max_model_len}), ({needed_gib} GB KV cache is "
    "needed, which is larger than the available KV cache memory ({available_gib} GB). Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
)
KV_CACHE_TOO_SMALL_ESTIMATE = (  # V1 0.8.4 - 0.21 (0.13+ add the URL sentence, 0.14+ round with format_gib)
    "To serve at least one request with the models's max seq len ({max_model_len}), ({needed_gib} GiB KV cache is "
    "needed, which is larger than the available KV cache memory ({available_gib} GiB). Based on the available memory, "
    "the estimated maximum model length is {estimate}. Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine.{url_sentence}"
)
WEIGHTS_DO_NOT_FIT = (  # 0.13+ log this before re-raising torch's error; older releases show torch's error only
    "{prefix}CUDA out of memory. Tried to allocate {tried_gib} GiB. {device} has a total capacity of {total_gib} GiB "
    "of which {free_gib} GiB is free."
)
WEIGHTS_DO_NOT_FIT_PREFIX = (
    "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory for weights, "
    "increasing --tensor-parallel-size, or using --quantization. See " + CONSERVING_MEMORY_URL + " for more tips. "
    "(original error: "
)
FREE_MEMORY_BELOW_UTILIZATION_V1 = (  # 0.9.1 - 0.13: no device name
    "Free memory on device ({free_gib}/{total_gib} GiB) on startup is less than desired GPU memory utilization "
    "({gpu_memory_utilization}, {requested_gib} GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes."
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
# The same figures as older releases log them.
V0_BLOCKS_LOG = "# {device} blocks: {num_gpu_blocks}, # CPU blocks: {num_cpu_blocks}"  # V0 ("GPU"; 0.7.x "CUDA"/"cuda")
CONCURRENCY_LOG = "Maximum concurrency for {max_model_len} tokens per request: {max_concurrency:.2f}x"  # 0.6.3+
KV_TOKENS_LOG = "GPU KV cache size: {kv_cache_tokens:,} tokens"  # V1 0.8.0 - 0.27, followed by CONCURRENCY_LOG


def kv_cache_too_small(max_model_len: int, needed_bytes: int, available_bytes: int, estimate: int) -> str:
    return KV_CACHE_TOO_SMALL.format(
        max_model_len=max_model_len,
        needed_gib=format_gib(needed_bytes),
        available_gib=format_gib(available_bytes),
        estimate=estimate,
        url=CONSERVING_MEMORY_URL,
    )


def kv_cache_size_log(kv_cache_tokens: int, max_model_len: int, max_concurrency: float, device: str = "GPU") -> str:
    return KV_CACHE_SIZE_LOG.format(
        device=device, kv_cache_tokens=kv_cache_tokens, max_model_len=max_model_len, max_concurrency=max_concurrency
    )


def no_memory_for_cache() -> str:
    return NO_MEMORY_FOR_CACHE.format(url=CONSERVING_MEMORY_URL)


def url_sentence() -> str:
    return f" See {CONSERVING_MEMORY_URL} for more details."


# --- Request validation (HTTP 400) and request failures (HTTP 500) -------------------------------------------------
# Wordings are vLLM 0.33's (vllm/sampling_params.py, vllm/renderers/base.py, vllm/v1/engine/exceptions.py) unless
# a comment says the message is kvtool's own.

TOKEN_OUT_OF_VOCAB = "Token id {token_id} is out of vocabulary"
TOKEN_IDS_OUT_OF_VOCAB = (  # stop_token_ids, logit_bias
    "token_id(s) {token_ids} in {param} contain out-of-vocab token ids. Vocabulary size: {vocab_size}"
)
ALLOWED_TOKEN_IDS_OUT_OF_VOCAB = "allowed_token_ids contains out-of-vocab token id!"
ALLOWED_TOKEN_IDS_EMPTY = "allowed_token_ids is not None and empty!"
BAD_WORD_WITHOUT_TOKENS = "bad_words entries must tokenize to at least one token."  # kvtool's own
LOGIT_BIAS_KEYS_NOT_INT = "logit_bias contains key(s) that cannot be converted to integer token IDs: {keys}"
EMPTY_PROMPT = "The decoder prompt cannot be empty"
NO_CHAT_TEMPLATE = (  # transformers' wording, then kvtool's advice
    "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the "
    "tokenizer does not define one. This model's tokenizer config has no chat_template: use /v1/completions with "
    "your own prompt format, or a model that ships one."
)
N_BELOW_ONE = "n must be at least 1, got {value}."
MIN_TOKENS_NEGATIVE = "min_tokens must be greater than or equal to 0, got {min_tokens}."
MIN_TOKENS_OVER_MAX = "min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}."
TEMPERATURE_NOT_FINITE = "temperature must be a finite number, got {value}."
TEMPERATURE_NEGATIVE = "temperature must be non-negative, got {value}."
TEMPERATURE_RANGE = "temperature must be in [0, 2], got {value}."
TOP_P_RANGE = "top_p must be in (0, 1], got {value}."
TOP_K_RANGE = "top_k must be 0 (disable), or at least 1, got {value}."
MIN_P_RANGE = "min_p must be in [0, 1], got {value}."
PENALTY_RANGE = "{name} must be in [-2, 2], got {value}."
REPETITION_PENALTY_NOT_FINITE = "repetition_penalty must be a finite number, got {value}."
REPETITION_PENALTY_NOT_POSITIVE = "repetition_penalty must be greater than zero, got {value}."
LOGPROBS_NEGATIVE = "logprobs must be non-negative or -1, got {value}."
LOGPROBS_OVER_MAX = "Requested sample logprobs of {value}, which is greater than max allowed: {max_logprobs}"
PROMPT_LOGPROBS_NEGATIVE = "prompt_logprobs must be non-negative or -1, got {value}."
PROMPT_LOGPROBS_OVER_MAX = "Requested prompt logprobs of {value}, which is greater than max allowed: {max_logprobs}"
LOGPROB_TOKEN_IDS_TOO_MANY = (
    "Requested logprob_token_ids of length {value}, which is greater than max allowed: {max_ids}"
)
LOGPROB_TOKEN_IDS_OUT_OF_VOCAB = (
    "token_id(s) {token_ids} in logprob_token_ids contain out-of-vocab token ids. Vocabulary size: {vocab_size}"
)
LOGPROB_TOKEN_IDS_LOGPROBS_MISMATCH = (
    "When both logprobs and logprob_token_ids are set, logprobs must equal len(logprob_token_ids). "
    "Got logprobs={logprobs}, len(logprob_token_ids)={value}."
)
STOP_EMPTY_STRING = "stop cannot contain an empty string."
# The logprob fields of a request, as vLLM 0.33's check_logprobs refuses them (openai/*/protocol.py).
LOGPROB_TOKEN_IDS_WITH_BEAM_SEARCH = "`logprob_token_ids` is not supported with beam search."
ECHO_LOGPROBS_WITH_BEAM_SEARCH = (
    "`echo` with `logprobs` is not supported with beam search because beam search does not compute prompt logprobs."
)
LOGPROB_TOKEN_IDS_WITHOUT_OUTPUT = (
    "`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` because no output tokens are generated."
)
LOGPROB_TOKEN_IDS_WITHOUT_LOGPROBS = "when using `logprob_token_ids`, `logprobs` must be set."
LOGPROB_TOKEN_IDS_WITHOUT_LOGPROBS_CHAT = "when using `logprob_token_ids`, `logprobs` must be set to true."
PROMPT_LOGPROBS_WITH_STREAM = "`prompt_logprobs` are not available when `stream=True`."
FIELD_NOT_POSITIVE_OR_MINUS_ONE = "`{param}` must be a positive value or -1."
TOP_LOGPROBS_WITHOUT_LOGPROBS = "when using `top_logprobs`, `logprobs` must be set to true."
# kvtool's own: vLLM bounds seeds by its request schema (a signed 64-bit integer), without a sentence.
SEED_RANGE = "seed must be a 64-bit signed integer, in [{low}, {high}], got {value}."
# kvtool's own: text with a lone surrogate cannot be encoded as UTF-8, so it cannot be tokenized.
TEXT_NOT_ENCODABLE = "{param} is not valid Unicode text: it holds a lone surrogate ({detail})."
# kvtool's own: a field vLLM accepts that the embedded engine does not implement is refused, never ignored.
FIELD_NOT_SUPPORTED = (
    "The request field '{param}' is not supported by kvtool's embedded engine (vLLM accepts it; kvtool does not "
    "implement it). Leave it out, send vLLM's default {default}, or serve with --backend vllm."
)
FIELDS_IGNORED_LOG = "The following fields were present in the request but ignored: {fields}"  # vLLM's log line

# Checks vLLM runs on the raw request body (entrypoints/openai/{completion,chat_completion}/protocol.py).
STREAM_OPTIONS_WITHOUT_STREAM = "Stream options can only be defined when `stream=True`."
PROMPT_OR_EMBEDS_MISSING = "Either prompt or prompt_embeds must be provided and non-empty."

STRUCTURED_OUTPUTS_KINDS = (
    "You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice')."
)
CONSTRAINTS_AND_NAMED_TOOL = "You can only either use constraints for structured outputs or tools, not both."
STREAMED_BEAM_SEARCH = "Streaming is not currently supported with beam search"  # completions only
# kvtool's own: vLLM scores an allowlist's tokens exactly, which the embedded engine's logprobs cannot.
ALLOWED_TOKEN_IDS_WITH_BEAM_SEARCH = (
    "allowed_token_ids with use_beam_search is not supported by kvtool's embedded engine: leave one of them out, "
    "or serve with --backend vllm."
)

# Structured outputs (vllm/sampling_params.py, v1/structured_output/backend_xgrammar.py).
STRUCTURED_MULTIPLE_KINDS = (
    "You can only use one kind of structured outputs constraint but multiple are specified: {constraints}"
)
STRUCTURED_NO_KIND = "You must use one kind of structured outputs constraint but none are specified: {constraints}"
GRAMMAR_NOT_COMPILED = "Failed to transform {what} into a grammar: {reason}"
GRAMMAR_INVALID = "Invalid grammar specification: {reason}"
JSON_GRAMMAR_INVALID = "Invalid JSON grammar specification: {reason}"
REGEX_HAS_NUL = "structured_outputs.regex must not contain a NUL character ('\\x00')"
# kvtool's own: what the embedded engine does not compile, and an empty choice list.
STRUCTURAL_TAG_NOT_SUPPORTED = (
    "{what} is not supported by kvtool's embedded engine; use json, regex, choice or grammar "
    "(or json_schema / json_object in response_format)."
)
CHOICE_EMPTY = "structured_outputs.choice must list at least one choice."
JSON_SCHEMA_MISSING = "response_format type 'json_schema' needs a `json_schema` with a `schema`."
NO_GRAMMAR_WITHOUT_TOKENIZER = "Structured outputs need a tokenizer; this model folder has none."

# Tools and the chat template (vllm/entrypoints/openai/chat_completion/protocol.py, serving.py).
TOOLS_EMPTY = "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."
TOOL_CHOICE_WITHOUT_TOOLS = "When using `tool_choice`, `tools` must be set."
TOOL_DEFS_NOT_OBJECT = "`$defs` in the parameters of tool '{name}' must be an object, got {kind}."
TOOL_DEFS_CONFLICT = "Tool definition '{name}' has multiple schemas, which is not supported."
TOOL_NOT_PASSED = "Tool '{name}' has not been passed in `tools`."
AUTO_TOOL_CHOICE_NEEDS_PARSER = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
UNTRUSTED_CHAT_TEMPLATE = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with "
    "untrusted chat template."
)
FORWARDED_IDS_INVALID = "`kv_transfer_params['prompt_token_ids']` must be a non-empty list of non-negative integers."
UNEXPECTED_TEMPLATE_KWARGS = "Found unexpected chat template kwargs from request: {names}"
CONTINUE_AND_GENERATION_PROMPT = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."

ENGINE_DEAD_CLIENT = "The server had an error while processing your request."  # vLLM's EngineDeadError.CLIENT_MESSAGE
# kvtool's own: one request failed inside an engine step; the others go on.
REQUEST_FAILED_IN_STEP = "Request {request_id} failed inside the engine step ({error}); the other requests continue."

# kvtool's own: GGUF weights kept quantized (--quantization gguf, on the CPU).
GGUF_TYPE_UNSUPPORTED = "GGUF tensor {name} is {type}; --quantization gguf keeps only these types quantized: {types}."
GGUF_TYPE_UNSUPPORTED_FIX = "Serve it with dequantized weights: leave out --quantization gguf."
GGUF_ARCH_UNKNOWN = "GGUF architecture {arch!r} is unknown to the gguf package."
GGUF_QUANTIZED_NOTE = (
    "GGUF weights kept quantized on the CPU: activations in float32 (rounded to int8 per group of 32 inside each "
    "quantized matmul, as llama.cpp does; --dtype float32 dequantizes the weights for exact fp32 matmuls), "
    "and by default the KV cache in float32 too, which then "
    "holds half the tokens of a 16-bit one (--kv-cache-dtype bfloat16 keeps K and V in 16 bits; --dtype bfloat16 "
    "dequantizes the weights instead)."
)
BF16_EMULATED_NOTE = (
    "dtype {dtype} runs this model in bfloat16, which this CPU has no instructions for: emulated, it runs "
    "several times slower than float32; --dtype float32 serves it at full speed."
)
QUANTIZATION_NEEDS_GGUF = "--quantization gguf needs a .gguf model file, got {model!r}."
QUANTIZATION_NEEDS_CPU = "--quantization gguf runs on the CPU only; the device is {device}."
QUANTIZATION_DTYPE = "--quantization gguf computes in float32; --dtype {dtype} asks for dequantized weights."

# POST /v1/chat/completions/batch (vllm/entrypoints/openai/chat_completion/protocol.py BatchChatCompletionRequest).
BATCH_BEAM_SEARCH = "Batch chat completions do not support beam search. Please set `use_beam_search` to False."
BATCH_PROMPT_TOKEN_IDS = (
    "Batch chat completions do not support `kv_transfer_params['prompt_token_ids']`: one pre-tokenized prompt "
    "cannot serve several conversations."
)
BATCH_N = "Batch chat completions do not support `n > 1`. Please set `n` to 1."
# kvtool's own: vLLM's batch model has no `stream` or `tools` and drops them; kvtool refuses what it cannot honour.
BATCH_STREAM = "Batch chat completions do not support streaming. Please set `stream` to False."
BATCH_TOOLS = "Batch chat completions do not support tools. Please leave `tools` out."

# Prompt embeddings (vllm/renderers/embed_utils.py, base.py, online_renderer.py, chat_utils/chat_message.py,
# vllm/utils/sparse_utils.py, completion/protocol.py); the server adds the " (parameter=prompt_embeds)" suffix.
PROMPT_EMBEDS_DISABLED = "You must set `--enable-prompt-embeds` to input `prompt_embeds`."
PROMPT_EMBEDS_NOT_BASE64 = "`prompt_embeds` is not valid base64: {reason}"  # kvtool's own (vLLM: pybase64's words)
PROMPT_EMBEDS_NOT_LOADED = "`prompt_embeds` could not be deserialized as a torch tensor: {reason}"
PROMPT_EMBEDS_NOT_TENSOR = "`prompt_embeds` payload did not deserialize to a torch.Tensor."
PROMPT_EMBEDS_TOO_LARGE = (
    "`prompt_embeds` declares shape {shape}, which would allocate {num_bytes} bytes ({mib:.0f} MiB) once densified, "
    "exceeding the {limit} byte limit. Set VLLM_MAX_EMBED_DECODE_BYTES to increase this limit."
)
PROMPT_EMBEDS_NOT_2D = "`prompt_embeds` must be a 2D tensor of shape (num_tokens, hidden_size); got shape {shape}."
PROMPT_EMBEDS_HIDDEN_SIZE = "`prompt_embeds` hidden_size {got} does not match the model's hidden_size {expected}."
PROMPT_EMBEDS_NOT_FLOAT = (
    "`prompt_embeds` dtype {dtype} is not a floating-point type, cannot safely cast to the model's dtype {expected}."
)
PROMPT_EMBEDS_TOO_MANY = (
    "prompt_embeds list length {count} exceeds the maximum allowed count of {limit}. To increase this limit, set the "
    "VLLM_MAX_COMPLETION_PROMPTS environment variable."
)
PROMPT_EMBEDS_WITH_ECHO = "Echo is unsupported with prompt embeds."
PROMPT_EMBEDS_WITH_PROMPT_LOGPROBS = "prompt_logprobs is not compatible with prompt embeds."
PROMPT_EMBEDS_WITH_SUFFIX = "suffix is not supported with prompt_embeds"
PROMPT_EMBEDS_PART_WITHOUT_DATA = (
    "prompt_embeds content part requires a non-empty `data` field with base64-encoded tensor bytes."
)
PROMPT_EMBEDS_PLACEHOLDER_IN_TEXT = (
    "Text content may not contain the reserved placeholder {token!r}. This placeholder is used internally to mark "
    "`prompt_embeds` splice positions in the tokenized prompt."
)
PROMPT_EMBEDS_PLACEHOLDER_REPEATED = (
    "Chat template rendered prompt_embeds placeholder {marker!r} {count} times; each placeholder must appear at most "
    "once."
)
CONTENT_PART_MISSING_TYPE = "Missing 'type' field in multimodal part."
CONTENT_PART_UNSUPPORTED = "Unsupported chat content part type: {part_type!r}. Supported types: {supported}."
# kvtool's own: a media part vLLM reads needs a multimodal model; the embedded engine runs text-only models.
CONTENT_PART_NEEDS_MULTIMODAL = (
    "Chat content part type {part_type!r} needs a multimodal model; kvtool's embedded engine serves text-only "
    "models. Send text (or prompt_embeds) parts, or serve a multimodal model with --backend vllm."
)
