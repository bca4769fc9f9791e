"""The settings a vLLM log states: its flags and its engine's config line, as vLLM's own names and types.

Four places print them, from the most to the least authoritative:
- the engine's config line, `Initializing a V1 LLM engine (v0.10.1) with config: model='...', dtype=torch.bfloat16,
  max_seq_len=16384, ...` (`Initializing an LLM engine (v0.4.3) ...` in V0), the values the engine runs with;
- `non-default args: {'model': '...', 'max_model_len': 16384, ...}` (0.9+), a Python dict that may hold a long
  chat template;
- `args: Namespace(model='...', max_model_len=None, ...)` (0.4 - 0.8), every flag;
- the command line a report quotes, `vllm serve MODEL --max-model-len 16384 ...`.
"""

import ast
import re
import shlex

from kvtool.engine.sizing.units import parse_human_int
from kvtool.errors import UsageError

# How far each source is trusted; LOG_LINE is a figure vLLM states on its own ("Using max model len 16384").
ENGINE_CONFIG, LOG_LINE, NON_DEFAULT_ARGS, ARGS_NAMESPACE, COMMAND_LINE = 4, 3, 2, 1, 0
_INT = ("max_model_len", "block_size", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
_INT += ("max_num_batched_tokens", "max_num_seqs", "kv_cache_memory_bytes")
_BOOL = ("enforce_eager", "enable_chunked_prefill", "enable_prefix_caching", "enable_expert_parallel")
_STR = ("model", "served_model_name", "dtype", "quantization", "kv_cache_dtype")
SETTINGS = _STR + _INT + ("gpu_memory_utilization",) + _BOOL
_ALIASES = {
    "model_tag": "model",
    "max_seq_len": "max_model_len",
    "chunked_prefill_enabled": "enable_chunked_prefill",
    "kv_cache_memory": "kv_cache_memory_bytes",
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "q": "quantization",
}
_SOURCES = (
    (re.compile(r"with\s*config:\s*"), ENGINE_CONFIG),
    (re.compile(r"non-default\s*args:\s*\{"), NON_DEFAULT_ARGS),
    (re.compile(r"args:\s*Namespace\("), ARGS_NAMESPACE),
)
_LONGEST_ARGS = 200_000  # characters: a long chat template fits; a whole log glued into one record is not read
_COMMAND = re.compile(r"\bvllm\s+serve\s|\bvllm\.entrypoints\.openai\.api_server\b")


def stated_args(text: str) -> tuple[int, dict[str, object]] | None:
    """(trust, {arg name: value as printed}) for a record that prints the engine config, the args or a command
    line; None for any other."""
    for start, trust in _SOURCES:
        if match := start.search(text):
            return trust, dict(_items(text[match.end() : match.end() + _LONGEST_ARGS]))
    if match := _COMMAND.search(text):
        return COMMAND_LINE, dict(_command_items(text[match.end() : match.end() + _LONGEST_ARGS].split("`")[0]))
    return None


def typed_settings(args: dict[str, object]) -> dict[str, object]:
    """The settings kvtool reads, by vLLM's name, with vLLM's types (`dtype=torch.bfloat16` is "bfloat16")."""
    settings = {}
    for name, value in args.items():
        name = _ALIASES.get(name, name)
        if name in SETTINGS and name not in settings and (converted := _convert(name, value)) is not None:
            settings[name] = converted
    return settings


def _convert(name: str, value: object) -> object:
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if value is None or str(value) == "None":
        return None
    first_word = str(value).split()[0] if str(value).split() else ""  # 0.6's config line lacks a comma
    if name in _BOOL:
        return first_word.lower() in ("true", "1")
    if name == "gpu_memory_utilization":
        return _number(float, first_word)
    if name in _INT:
        number = _number(parse_human_int, first_word)
        return number if number is not None and number > 0 else None  # -1 / auto: vLLM picks the length
    return str(value).removeprefix("torch.")


def _number(parse, value: object) -> float | int | None:
    try:
        return parse(value)
    except (ValueError, UsageError):
        return None


def _items(text: str) -> list[tuple[str, object]]:
    """`key=value, ...` or `'key': value, ...` pairs up to the bracket that closes them (or the text's end)."""
    pieces = _top_level(text)
    pairs = [re.match(r"\s*['\"]?(\w+)['\"]?\s*[:=](.*)", piece, re.S) for piece in pieces]
    return [(pair[1], _python_value(pair[2])) for pair in pairs if pair]


def _top_level(text: str) -> list[str]:
    """`text` split at the commas outside brackets and quotes, up to the first bracket it does not open."""
    pieces, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote and text[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}" and depth:
            depth -= 1
        elif char in ")]}":
            return [*pieces, text[start:index]]
        elif char == "," and not depth:
            pieces.append(text[start:index])
            start = index + 1
    return [*pieces, text[start:]]


def _python_value(raw: str) -> object:
    try:
        return ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw.strip()


def _command_items(command: str) -> list[tuple[str, object]]:
    """`MODEL --flag value --switch --flag=value -tp 2` as (arg name, value) pairs."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    items = [] if not tokens or tokens[0].startswith("-") else [("model", tokens[0])]
    for index, token in enumerate(tokens):
        if re.match(r"--?[a-z]", token):
            name, _, value = token.lstrip("-").partition("=")
            following = tokens[index + 1] if index + 1 < len(tokens) else "-"
            value = value or (following if not re.match(r"-[a-z-]", following) else "True")
            items.append(_flag(name, value))
    return items


def _flag(name: str, value: str) -> tuple[str, object]:
    name = name.replace("-", "_")
    if name.startswith("no_"):
        return name[3:], False
    return name, value
