"""Numbers read by a key right before them, in any layout people paste: `--max-model-len 4096`,
`--max-model-len=4096`, `max_model_len=4096`, `"max_model_len": 4096`, `'--max-model-len', '4096'`,
`max_model_len(4096)`, `max_model_len is 4096`, lm-eval's `max_model_length=4096,gpu_memory_utilisation=0.8`, a
config path's last part (`rollout.max_num_batched_tokens=8192`), a stats line's `Running: 8 reqs`, a Prometheus
sample (`vllm:num_requests_waiting{model_name="x"} 45`), prose that links a key to its value with a verb
(`kv_cache_usage_perc stuck at 1.0`); a bare switch (`--enforce-eager`), a list of token ids (counted), a
Prometheus query's sample (its metric named by `__name__`)."""

import re
from collections.abc import Iterator

from kvtool.engine.diagnosis.quantities import BY_NAME, KEYS, Quantity
from kvtool.engine.diagnosis.values import NUMBER, UNITS, convert

# a trainer's metric names its group before a slash (`completions/clipped_ratio`, `response_length/max`)
KEY = re.compile(r"(?<![\w./-])(?P<key>(?:--?)?[A-Za-z_][\w./-]{0,60})")
# the verbs and words of prose between a key and its value ("is set to", "stuck at", "keeps going up (")
_LINK = (
    r"is|was|are|were|set|stays?|stayed|stuck|sits?|sitting|hover\w*|keeps?|kept|goes|going|went|climb\w*|jump\w*|"
    r"rises|rising|rose|grows?|growing|grew|reach\w*|hits?|hitting|peak\w*|pinned|up|at|to|of|near|around|above|"
    r"over|about|only|already|still|"
    r"está|están|es|en|de|sobre|ist|liegt|bei|auf|steht|bleibt|на|в|около|é|em|fica|est|reste"  # es, de, ru, pt, fr
)
# words of a language written without spaces between a key and its value ("kv_cache_usage_perc 一直是 0.99")
_CJK_LINK = r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]{1,6}"
# between a key and its value: a Prometheus label set, a unit (`Mean TTFT (ms):`), then `=`, `:`, a space after a
# flag, quotes and brackets, `(`, or a few linking words
_BETWEEN = (
    r"""(?:\{[^{}\n]{0,200}\})?(?:\s*[(\[](?P<key_unit>%|ms|s|GiB|GB|MiB)[)\]])?['"]?\]?\s*(?:[:=]|：|\(|,\s*(?=['"])|\s+(?:(?:"""
    + _LINK
    + r""")\s+){1,4}\(?|\s*"""
    + _CJK_LINK
    + r"""\s*|\s+=\s+|\s+)\s*(?:already\s+|only\s+|about\s+|~)?['"\[]?"""
)
VALUE = re.compile(
    _BETWEEN + rf"(?:(?P<number>{NUMBER})(?!\.\d)(?:\s?(?P<unit>{UNITS})|(?!\w))"
    r"|(?P<word>true\b|false\b|True\b|False\b|[A-Za-z][\w./:@-]{0,120}))"
)
# a list of token ids, which counts tokens: LLM.generate's RequestOutput, a request log
TOKEN_IDS = re.compile(r"\b(?P<key>prompt_token_ids|token_ids|output_ids)\s*[=:]\s*[\[(](?P<items>[\d,\s]*\d)[\])]")
COUNTED = {"prompt_token_ids": "prompt_tokens", "token_ids": "completion_tokens", "output_ids": "completion_tokens"}
# a switch given bare: `--enforce-eager`, `--no-enable-chunked-prefill`
BARE_SWITCH = re.compile(  # a switch alone: not one given a value (`--enable-chunked-prefill false`)
    r"(?<![\w-])--(?P<no>no-)?(?P<key>enforce-eager|enable-chunked-prefill)(?![\w-])(?!\s*=)"
    r"(?!\s+['\"]?(?:true|false|\d)\b)",
    re.IGNORECASE,
)
# a load told twice, before and under load (`vllm:num_requests_waiting: 0 / 63`): both are read
SERIES = {"kv_cache_usage_percent", "num_waiting", "num_running", "num_preemptions", "preemptions_per_s"}
THEN = re.compile(rf"\s*(?:/|->|→)\s*(?P<number>{NUMBER})(?![\d.]*\s?(?:GiB|GB|MiB))")
# nvidia-smi's memory cell of a GPU: what is in use of its total (`|   1187MiB / 24564MiB |`)
SMI_USAGE = re.compile(r"\|\s*(?P<used>\d+)\s?MiB\s*/\s*(?P<total>\d+)\s?MiB\s*\|")
# a Prometheus query's sample, where the metric's name is a label: the HTTP API's JSON
# (`{"metric":{"__name__":"vllm:kv_cache_usage_perc",...},"value":[1733400000.1,"0.997"]}`) and the console's
# `{__name__="vllm:kv_cache_usage_perc", instance="..."} 0.997`
PROM_SAMPLE = re.compile(
    r"""__name__['"]?\s*[:=]\s*['"](?:\w+:)?(?P<key>\w+)['"][^\n]{0,300}?"""
    rf"""(?:"value"\s*:\s*\[\s*[\d.eE+]+\s*,\s*"(?P<sampled>{NUMBER})"|\}}\s*(?:=>\s*)?(?P<shown>{NUMBER}))"""
)
Reading = tuple[str, int | float | str | bool, str | None, tuple[int, int]]  # quantity, value, unit, span


def normal_key(key: str) -> str:
    """`--max-model-len`, `max-model-len`, `rollout.max_model_len`, `maxModelLen`: `max_model_len`; a metric's group
    joins its name (`response_length/max`: `response_length_max`)."""
    key = key.lstrip("-").rsplit(".", 1)[-1].replace("/", "_")
    if not key.islower():
        key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)
    return key.replace("-", "_").lower()


def quantity_of(key: str) -> tuple[Quantity | None, str | None]:
    """The quantity a key names, and the unit its name gives its values: TRL's `vllm_gpu_memory_utilization` is
    vLLM's own, a histogram's `time_to_first_token_seconds_bucket` is TTFT in seconds."""
    name = normal_key(key)
    unit = None
    if name.endswith("_seconds") or name.endswith("_seconds_bucket"):
        name, unit = name[: name.rindex("_seconds")], "s"
    quantity = KEYS.get(name)
    if quantity is None and "/" in key:  # a path or a metric's group before the key: its last part
        return quantity_of(key.rsplit("/", 1)[-1])
    if quantity is None and name.startswith("vllm_"):
        quantity = KEYS.get(name[5:])
    return quantity, unit


def keyed(text: str) -> Iterator[Reading]:
    """Every number (or name, or switch) `text` states after a key."""
    if "--" in text:
        for match in BARE_SWITCH.finditer(text):
            yield normal_key(match.group("key")), not match.group("no"), None, match.span()
    if "_ids" in text:
        for match in TOKEN_IDS.finditer(text):
            count = match.group("items").count(",") + 1
            yield COUNTED[match.group("key")], count, "ids", match.span("items")
    if "MiB /" in text and (match := SMI_USAGE.search(text)):
        for name, group in (("gpu_used_gib", "used"), ("total_gib", "total")):
            yield name, convert(BY_NAME[name], match.group(group), "MiB"), "MiB", match.span(group)
    if "__name__" in text:
        for match in PROM_SAMPLE.finditer(text):
            group = "sampled" if match.group("sampled") is not None else "shown"
            quantity, unit = quantity_of(match.group("key"))
            if quantity is not None and (value := convert(quantity, match.group(group), unit)) is not None:
                yield quantity.name, value, unit, match.span(group)
    for key in KEY.finditer(text):
        name = key.group("key").rstrip(".-")
        quantity, named_unit = quantity_of(name)
        if quantity is None or (match := VALUE.match(text, key.start() + len(name))) is None:
            continue
        value_group = "number" if match.group("number") is not None else "word"
        between = text[key.start() + len(name) : match.start(value_group)]
        if quantity.kind in ("str", "bool") and not (re.search("[-_]", name) or re.search("[=:]", between)):
            continue  # a name or a switch only where a flag or a key states it, not after a word of prose
        if match.group("key_unit") and "[" in between and not re.search("[=:]", between):
            continue  # a CSV header's column (`used_memory [MiB]`) before a row's first cell, not its value
        unit = match.group("unit") or match.group("key_unit") or named_unit
        value = convert(quantity, match.group(value_group), unit)
        if value is not None:
            yield quantity.name, value, unit, match.span(value_group)
        if quantity.name in SERIES and (then := THEN.match(text, match.end(value_group))):
            if (value := convert(quantity, then.group("number"), unit)) is not None:
                yield quantity.name, value, unit, then.span("number")
