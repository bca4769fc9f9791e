"""The OpenAI-compatible server's defaults and choice lists, defined once: where it listens, the API it follows,
its keys, its tool-call parsers and its request limits (the engine's are in sizing/defaults.py)."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"  # where `kvtool bench` looks for a server by default

# The vLLM release whose OpenAI-compatible API `kvtool serve` follows: GET /version answers it.
VLLM_API_VERSION = "0.33.0"
# Where `kvtool serve` reads its API key when --api-key is not given, first found wins: kvtool's, then vLLM's.
API_KEY_ENVIRONMENT = ("KVTOOL_API_KEY", "VLLM_API_KEY")
# The path prefixes the API key guards (vLLM's); health checks, /metrics and SageMaker's routes stay open.
API_KEY_GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")

# How `tool_choice: "auto"` reads tool calls out of the reply (vLLM's --tool-call-parser names).
TOOL_CALL_PARSERS = ("hermes", "llama3_json")
DEFAULT_TOOL_CALL_PARSER = "hermes"  # the <tool_call> JSON of Qwen, SmolLM and Hermes chat templates

# The most entries a completions `prompt_embeds` list may hold: vLLM's environment variable and its default.
MAX_COMPLETION_PROMPTS = ("VLLM_MAX_COMPLETION_PROMPTS", 1024)
