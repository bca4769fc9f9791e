"""Round trip: every message template kvtool raises is recognised by `kvtool diagnose`, with its numbers."""

import re

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.sizing import messages

# template name -> (values it is formatted with, the category diagnose must name)
CASES = {
    "PROMPT_TOO_LONG": (dict(max_model_len=4096, prompt_tokens=4097, at_least="at least "), "request_too_long"),
    "PROMPT_CHARS_TOO_LONG": (dict(max_model_len=4096, prompt_chars=90000, max_input_chars=81920,
                                   max_input_tokens=4096), "request_too_long"),
    "NO_ROOM_FOR_OUTPUT": (dict(max_model_len=4096, prompt_tokens=4096), "request_too_long"),
    "MAX_TOKENS_TOO_LARGE": (dict(param="max_tokens", max_tokens=9000, max_model_len=4096), "request_too_long"),
    "TOTAL_TOO_LONG": (dict(max_model_len=4096, max_tokens=1000, prompt_tokens=3500, total_tokens=4500, at_least=""),
                       "request_too_long"),
    "TOTAL_CHARS_TOO_LONG": (dict(max_model_len=4096, max_tokens=96, prompt_chars=90000, max_input_chars=80000,
                                  max_input_tokens=4000), "request_too_long"),
    "MODEL_NOT_FOUND": (dict(model="llama-3-8b", aliases="smollm2"), "model_not_found"),
    "MAX_TOKENS_BELOW_ONE": (dict(max_tokens=-3), "request_too_long"),
    "NO_MEMORY_FOR_CACHE": (dict(url=messages.CONSERVING_MEMORY_URL), "no_cache_blocks"),
    "KV_CACHE_TOO_SMALL": (dict(max_model_len=32768, needed_gib="4.0", available_gib="2.5", estimate=20480,
                                url=messages.CONSERVING_MEMORY_URL), "kv_cache_too_small_at_startup"),
    "MAX_MODEL_LEN_OVER_DERIVED": (dict(max_model_len=16384, derived=8192), "max_model_len_above_derived"),
    "BATCHED_TOKENS_BELOW_MODEL_LEN": (dict(max_num_batched_tokens=2048, max_model_len=8192),
                                       "batched_tokens_lt_model_len"),
    "BATCHED_TOKENS_BELOW_NUM_SEQS": (dict(max_num_batched_tokens=64, max_num_seqs=128), "batched_tokens_lt_num_seqs"),
    "FREE_MEMORY_BELOW_UTILIZATION": (dict(device="cuda:0", free_gib=40.5, total_gib=79.19, gpu_memory_utilization=0.9,
                                           requested_gib=71.27), "gpu_memory_held_by_others"),
    "CANNOT_AUTO_FIT": ({}, "no_cache_blocks"),
}
# Not failures: diagnose reads them for context only.
LOG_LINES = {"KV_CACHE_SIZE_LOG"}


def templates() -> dict[str, str]:
    return {name: value for name, value in vars(messages).items() if name.isupper() and "{" in str(value)
            or name in CASES}


def test_every_template_has_a_round_trip_case():
    assert set(templates()) - LOG_LINES == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_recognises_the_message_with_its_numbers(name):
    values, category = CASES[name]
    text = getattr(messages, name).format(**values)
    findings = [f for f in diagnose_text(text).findings if f.category == category]
    assert findings, f"{name} is not recognised as {category}: {text}"
    numbers_in_text = {float(n) for n in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text)}
    numeric_values = {float(v) for v in values.values() if isinstance(v, (int, float)) or str(v).replace(".", "").isdigit()}
    read = {float(v) for v in findings[0].numbers.values() if isinstance(v, (int, float))}
    assert numeric_values <= numbers_in_text  # the template prints every number it is given
    assert numeric_values <= read, f"{name}: numbers {numeric_values - read} not read from: {text}"
