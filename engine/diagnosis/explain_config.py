"""Configuration and API findings: scheduler limits, context overrides, chat templates, tools, model names
(what one scheduler step holds: explain_budget.py)."""

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel

# model family (from the model name) -> vLLM --tool-call-parser
TOOL_PARSERS = {
    "llama-3": "llama3_json",
    "llama3": "llama3_json",
    "llama-4": "llama4_pythonic",
    "qwen": "hermes",
    "hermes": "hermes",
    "mistral": "mistral",
    "mixtral": "mistral",
    "granite": "granite",
    "internlm": "internlm",
    "deepseek-v3": "deepseek_v3",
    "gpt-oss": "openai",
    "kimi": "kimi_k2",
}


def _finding(obs: Observation, numbers: dict, summary: str, fixes: list[Fix]) -> Finding:
    return Finding(obs.category, obs.stage, summary, numbers, fixes, obs.evidence, obs.span)


def batched_tokens_lt_num_seqs(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = obs.numbers
    summary = (
        f"max_num_batched_tokens ({n['max_num_batched_tokens']}) is below max_num_seqs ({n['max_num_seqs']}): "
        "a step must hold at least one token per running sequence."
    )
    return _finding(
        obs,
        dict(n),
        summary,
        [
            Fix("lower the number of sequences", flag="--max-num-seqs", value=n["max_num_batched_tokens"]),
            Fix("or raise the step size", flag="--max-num-batched-tokens", value=n["max_num_seqs"]),
        ],
    )


def max_model_len_above_derived(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = dict(obs.numbers)
    derived = int(n["derived_max_model_len"])
    summary = (
        f"max_model_len {n['max_model_len']} is longer than the {derived} tokens the model was trained for; "
        "vLLM refuses unless told otherwise, since positions past it give garbage."
    )
    return _finding(
        obs,
        n,
        summary,
        [
            Fix("use the model's own context", flag="--max-model-len", value=derived),
            Fix(
                "only with RoPE scaling configured for the longer length", flag="VLLM_ALLOW_LONG_MAX_MODEL_LEN", value=1
            ),
        ],
    )


def missing_chat_template(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    summary = (
        "The tokenizer has no chat template, so /v1/chat/completions cannot turn messages into a prompt "
        "(usually a base model, not the instruct one)."
    )
    return _finding(
        obs,
        {},
        summary,
        [
            Fix("serve the instruct/chat checkpoint of the model", flag="--model", value=None),
            Fix("or give a Jinja chat template", flag="--chat-template", value="./template.jinja"),
            Fix("or send raw prompts to /v1/completions", param="endpoint", value="/v1/completions"),
        ],
    )


def tool_choice_auto_without_flags(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    name = (context.model or "").lower()
    parser = next((parser for family, parser in TOOL_PARSERS.items() if family in name), None)
    summary = 'The client sent tools with tool_choice "auto", but the server was not started with tool calling on.'
    return _finding(
        obs,
        {},
        summary,
        [
            Fix("turn on automatic tool calling", flag="--enable-auto-tool-choice", value=True),
            Fix("and pick the parser for the model family", flag="--tool-call-parser", value=parser),
            Fix('or have the client name the tool, or send tool_choice "none"', param="tool_choice", value="none"),
        ],
    )


def model_not_found(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    served = context.served_model_name or context.model
    summary = (
        f'The server does not serve a model named "{obs.detail}" (HTTP 404): the request\'s model must equal '
        "--served-model-name, or the --model path when that is unset."
    )
    return _finding(
        obs,
        {},
        summary,
        [
            Fix("send the served name (list them with GET /v1/models)", param="model", value=served),
            Fix("or serve the model under the name clients use", flag="--served-model-name", value=obs.detail),
        ],
    )


def max_tokens_not_positive(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    asked = obs.numbers["max_tokens"]
    summary = (
        f'The client sends max_tokens {asked}, its own way to say "no limit"; vLLM takes only a positive max_tokens '
        "(or none) and refuses the request before any length check. The context and the prompt are not the cause."
    )
    fixes = [
        Fix("leave max_tokens out: vLLM then gives the answer the room left in the context", param="max_tokens"),
        Fix("or set a positive cap", param="max_tokens", value=None),
    ]
    return _finding(obs, dict(obs.numbers), summary, fixes)
