"""Clients, harnesses and trainers in front of vLLM that send an output cap of their own when the user sets none:
the cap vLLM then applies is theirs, not vLLM's. Each default was read in the package's own code (the release
named); a client none of these is, or one whose default is no cap (LangChain's ChatOpenAI, LlamaIndex's
OpenAILike, LiteLLM, AutoGen's OpenAIChatCompletionClient, lighteval: None), gives nothing."""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Client:
    name: str  # as the finding names it
    gates: tuple[str, ...]  # substrings every match of `sign` holds: a line without any is not searched
    sign: re.Pattern  # how a paste shows it in use (an import, a class, a command)
    param: str  # the name of its output cap, which the fix sets
    default: int
    source: str  # where the default was read
    harness: bool = False  # an evaluation harness: a cut answer shows as a score far below another backend's
    sends_none: bool = False  # it sends no cap: `default` is the server's (vLLM's /v1/completions), not its own


def _sign(pattern: str) -> re.Pattern:
    return re.compile(pattern)


CLIENTS = (
    Client(
        "LangChain's OpenAI completion class",
        ("langchain",),
        _sign(r"langchain(?:_openai|_community\.llms|\.llms)(?:\.\w+)* import (?:[\w, ]*\b)?(?:Azure)?OpenAI\b"),
        "max_tokens",
        256,
        "langchain-openai 1.8.1 llms/base.py BaseOpenAI.max_tokens, which its AzureOpenAI inherits "
        "(langchain-community 0.4.2 llms/openai.py OpenAI and AzureOpenAI alike)",
    ),
    Client(
        "LangChain's VLLMOpenAI",
        ("VLLMOpenAI(",),
        _sign(r"\bVLLMOpenAI\("),
        "max_tokens",
        256,
        "langchain-community 0.4.2 llms/openai.py BaseOpenAI.max_tokens",
    ),
    Client(
        "LangChain's OpenAI-compatible completion class",
        ("Anyscale(", "OctoAIEndpoint(", "OCIModelDeploymentVLLM("),
        _sign(r"\b(?:Anyscale|OctoAIEndpoint|OCIModelDeploymentVLLM)\("),
        "max_tokens",
        256,
        "langchain-community 0.4.2 llms/anyscale.py Anyscale and llms/octoai_endpoint.py OctoAIEndpoint inherit "
        "BaseOpenAI.max_tokens; llms/oci_data_science_model_deployment_endpoint.py OCIModelDeploymentVLLM inherits "
        "OCIModelDeploymentLLM.max_tokens",
    ),
    Client(
        "LangChain's VLLM",
        ("VLLM(",),
        _sign(r"(?<![\w.])VLLM\("),
        "max_new_tokens",
        512,
        "langchain-community 0.4.2 llms/vllm.py VLLM.max_new_tokens",
    ),
    Client(
        "LlamaIndex's Vllm",
        ("llama_index.llms.vllm", "Vllm"),
        _sign(r"llama_index\.llms\.vllm|\bVllm(?:Server)?\("),
        "max_new_tokens",
        512,
        "llama-index-llms-vllm 0.8.0 base.py Vllm.max_new_tokens",
    ),
    Client(
        "lm-eval",
        ("lm_eval", "lm-eval", "simple_evaluate(", "--model "),
        _sign(r"\blm[_-]eval\b|\bsimple_evaluate\(|--model (?:local-(?:chat-)?completions|vllm)\b"),
        "max_gen_toks",
        256,
        "lm-eval 0.4.13 models/api_models.py and models/vllm_causallms.py max_gen_toks",
        harness=True,
    ),
    Client(
        "TRL's trainer",
        ("GRPO", "RLOO", "trl.trainer"),
        _sign(r"\b(?:GRPO|RLOO)(?:Config|Trainer)\b|\btrl\.trainer\b"),
        "max_completion_length",
        512,
        "trl 1.16.0 trainer/grpo_config.py and rloo_config.py max_completion_length",
    ),
    Client(
        "verl",
        ("verl.trainer", "actor_rollout_ref"),
        _sign(r"\bverl\.trainer\b|\bactor_rollout_ref\b"),
        "data.max_response_length",
        512,
        "verl 0.9.1 trainer/config/data/legacy_data.yaml max_response_length",
    ),
    Client(
        "OpenCompass",
        ("opencompass", "OpenAISDK"),
        _sign(r"\bopencompass\b|\bOpenAISDK\b"),
        "max_out_len",
        512,
        "opencompass 0.5.4 models/openai_api.py OpenAI.generate(max_out_len=512)",
        harness=True,
    ),
    Client(
        "the OpenAI SDK's completions call",
        ("Completion.create(", "completions.create("),
        _sign(r"(?<!chat\.)\b(?:Completion|completions)\.create\((?![^)\n]*max_tokens)"),
        "max_tokens",
        16,
        "openai 1.109.1 resources/completions.py Completions.create(max_tokens=omit) sends none, as openai 0.28.1 "
        "api_resources/completion.py Completion.create(**kwargs) does; vLLM's /v1/completions then applies "
        "CompletionRequest.max_tokens 16",
        sends_none=True,
    ),
)
BY_NAME = {client.name: client for client in CLIENTS}


def shown(text: str) -> Client | None:
    """The first client of CLIENTS the text shows in use."""
    found = (client for client in CLIENTS if any(gate in text for gate in client.gates) and client.sign.search(text))
    return next(found, None)
