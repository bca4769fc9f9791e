"""Every message template kvtool raises, defined once; placeholders are str.format fields."""

# --- Request validation (HTTP 400) and request failures (HTTP 500) -------------------------------------------------
# Wordings are vLLM 0.33's (vllm/sampling_params.py, vllm/renderers/base.py, vllm/v1/engine/exceptions.py) unless
# a comment says the message is kvtool's own.

TOKEN_OUT_OF_VOCAB = "Token id {token_id} is out of vocabulary"
STOP_TOKEN_IDS_OUT_OF_VOCAB = (
    "token_id(s) {token_ids} in stop_token_ids contain out-of-vocab token ids. Vocabulary size: {vocab_size}"
)
EMPTY_PROMPT = "The decoder prompt cannot be empty"
N_BELOW_ONE = "n must be at least 1, got {value}."
MAX_TOKENS_BELOW_ONE = "max_tokens must be at least 1, got {max_tokens}."
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
STOP_EMPTY_STRING = "stop cannot contain an empty string."
# kvtool's own: vLLM bounds seeds by its request schema (a signed 64-bit integer), without a sentence.
SEED_RANGE = "seed must be a 64-bit signed integer, in [{low}, {high}], got {value}."
# kvtool's own: text with a lone surrogate cannot be encoded as UTF-8, so it cannot be tokenized.
TEXT_NOT_ENCODABLE = "{param} is not valid Unicode text: it holds a lone surrogate ({detail})."
# kvtool's own: a field that the embedded engine does not implement is refused, never ignored.
FIELD_NOT_SUPPORTED = "{param} is not supported by kvtool's embedded engine; remove it, or serve with --backend vllm."

ENGINE_DEAD_CLIENT = "The server had an error while processing your request."  # vLLM's EngineDeadError.CLIENT_MESSAGE
# kvtool's own: one request failed inside an engine step; the others go on.
REQUEST_FAILED_IN_STEP = "Request {request_id} failed inside the engine step ({error}); the other requests continue."
