"""vLLM `serve` flags, as vLLM's tests pass them, turned into `kvtool serve` flags.

A flag kvtool has travels under its kvtool name. A flag without any effect on what the API answers
(compilation, attention kernels, scheduling, parallelism) is dropped and listed as such. Every other
flag is a gap: it is dropped too, but recorded, so a test that fails for want of it says so.
"""

import re
from dataclasses import dataclass, field

KVTOOL_FLAGS = {
    "--max-model-len": "--max-model-len",
    "--max-num-seqs": "--max-num-seqs",
    "--max-num-batched-tokens": "--max-num-batched-tokens",
    "--kv-cache-dtype": "--kv-cache-dtype",
    "--gpu-memory-utilization": "--gpu-memory-utilization",
    "--seed": "--seed",
    "--host": "--host",
    "--port": "--port",
    "--api-key": "--api-key",
    "--load-format": "--load-format",
    "--dtype": "--dtype",
    "--tool-call-parser": "--tool-call-parser",
    "--root-path": "--root-path",
    "--uds": "--uds",
    "--enable-server-load-tracking": "--enable-server-load-tracking",
    "--enable-prompt-embeds": "--enable-prompt-embeds",
    "--enable-request-id-headers": "--enable-request-id-headers",
    "--enable-tokenizer-info-endpoint": "--enable-tokenizer-info-endpoint",
    "--max-logprobs": "--max-logprobs",
    "--return-tokens-as-token-ids": "--return-tokens-as-token-ids",
    "--enable-prompt-tokens-details": "--enable-prompt-tokens-details",
    "--enable-force-include-usage": "--enable-force-include-usage",
    "--enable-per-request-metrics": "--enable-per-request-metrics",
}
KVTOOL_SWITCHES = {"--trust-request-chat-template"}  # flags without a value, the same in both
KVTOOL_VALUES = {
    "--dtype": {
        "auto": "auto",
        "half": "float16",
        "float16": "float16",
        "bfloat16": "bfloat16",
        "float": "float32",
        "float32": "float32",
    },
    "--tool-call-parser": {"hermes": "hermes", "llama3_json": "llama3_json"},
}
NO_API_EFFECT = {
    "--enforce-eager",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--attention-backend",
    "--async-scheduling",
    "--no-async-scheduling",
    "--distributed-executor-backend",
    "--cpu-offload-gb",
    "--trust-remote-code",
    "--disable-log-stats",
    "--disable-log-requests",
    "--shutdown-timeout",
    "--uvicorn-log-level",
    # kvtool reads tool calls in "auto" mode without being asked to.
    "--enable-auto-tool-choice",
}
ONE_DEVICE = {"--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp"}
FLAG = re.compile(r"^--?[A-Za-z]")


@dataclass
class Translation:
    """`kvtool serve` arguments for one vLLM command line, and what did not travel."""

    args: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    no_effect: list[str] = field(default_factory=list)


def split_flags(vllm_args: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value) pairs: the words up to the next flag, space-joined (`--served-model-name a b`);
    a flag followed by another flag, or last, has no value."""
    pairs: list[tuple[str, str | None]] = []
    for word in vllm_args:
        if FLAG.match(word):
            flag, _, value = word.partition("=")
            pairs.append((flag, value or None))
        elif pairs:
            flag, value = pairs[-1]
            pairs[-1] = (flag, word if value is None else f"{value} {word}")
    return pairs


def shown(flag: str, value: str | None) -> str:
    return flag if value is None else f"{flag} {value}"


def translate_one(flag: str, value: str | None, out: Translation, context: int) -> None:
    if flag == "--max-model-len" and value is not None and int(value) > context:
        out.args += [flag, str(context)]
        out.missing.append(f"{flag} {value} (capped at the model's context, {context})")
    elif flag in KVTOOL_SWITCHES and value is None:
        out.args.append(flag)
    elif flag in KVTOOL_FLAGS and (flag not in KVTOOL_VALUES or value in KVTOOL_VALUES[flag]):
        kvtool_value = KVTOOL_VALUES.get(flag, {}).get(value, value)
        out.args += [KVTOOL_FLAGS[flag]] + ([] if value is None else [kvtool_value])  # a switch has no value
    elif flag in NO_API_EFFECT or (flag in ONE_DEVICE and value == "1"):
        out.no_effect.append(shown(flag, value))
    else:
        out.missing.append(shown(flag, value))


def to_kvtool(model: str, vllm_args: list[str], kvtool_model: str, context: int) -> Translation:
    """kvtool serves `kvtool_model` (of `context` tokens at most) under the name the test asks for."""
    out = Translation(args=["--model", kvtool_model])
    names = [model]
    for flag, value in split_flags(vllm_args):
        if flag == "--served-model-name" and value is not None:
            names = value.split()
        else:
            translate_one(flag, value, out, context)
    out.args += ["--served-model-name", names[0]]
    out.missing += [f"--served-model-name (a second name: {name})" for name in names[1:]]
    if "--host" not in out.args:
        out.args += ["--host", "127.0.0.1"]
    return out
