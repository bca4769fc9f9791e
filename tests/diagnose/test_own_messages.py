"""Round trip: every message template kvtool raises is recognised by `kvtool diagnose`, with its numbers."""

import re
import textwrap

import pytest

from kvtool.engine.diagnosis import diagnose_text, wordings
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES
from kvtool.engine.sizing import messages

# template name -> (values it is formatted with, the category diagnose must name)
CASES = {
    "PROMPT_TOO_LONG": (dict(max_model_len=4096, prompt_tokens=4097, qualifier="at least "), "request_too_long"),
    "PROMPT_CHARS_TOO_LONG": (
        dict(max_model_len=4096, prompt_characters=90000, max_input_characters=81920, max_input_tokens=4096),
        "request_too_long",
    ),
    "NO_ROOM_FOR_OUTPUT": (dict(max_model_len=4096, prompt_tokens=4096), "request_too_long"),
    "MAX_TOKENS_TOO_LARGE": (dict(param="max_tokens", max_tokens=9000, max_model_len=4096), "request_too_long"),
    "TOTAL_TOO_LONG": (
        dict(max_model_len=4096, max_tokens=1000, prompt_tokens=3500, total_tokens=4500, qualifier=""),
        "request_too_long",
    ),
    "TOTAL_CHARS_TOO_LONG": (
        dict(
            max_model_len=4096,
            max_tokens=96,
            prompt_characters=90000,
            max_input_characters=80000,
            max_input_tokens=4000,
        ),
        "request_too_long",
    ),
    "MODEL_NOT_FOUND": (dict(requested_model="llama-3-8b", aliases="smollm2"), "model_not_found"),
    "MAX_TOKENS_BELOW_ONE": (dict(max_tokens=-3), "request_too_long"),
    "TRUNCATE_PROMPT_TOKENS_TOO_LARGE": (dict(truncate_prompt_tokens=9000, max_input_tokens=8192), "request_too_long"),
    "NO_MEMORY_FOR_CACHE": (dict(url=messages.CONSERVING_MEMORY_URL), "no_cache_blocks"),
    "KV_CACHE_TOO_SMALL": (
        dict(
            max_model_len=32768,
            needed_gib="4.0",
            available_gib="2.5",
            estimate=20480,
            url=messages.CONSERVING_MEMORY_URL,
        ),
        "kv_cache_too_small_at_startup",
    ),
    "MAX_MODEL_LEN_OVER_DERIVED": (dict(max_model_len=16384, derived=8192), "max_model_len_above_derived"),
    "BATCHED_TOKENS_BELOW_MODEL_LEN": (
        dict(max_num_batched_tokens=2048, max_model_len=8192),
        "batched_tokens_lt_model_len",
    ),
    "BATCHED_TOKENS_BELOW_NUM_SEQS": (dict(max_num_batched_tokens=64, max_num_seqs=128), "batched_tokens_lt_num_seqs"),
    "FREE_MEMORY_BELOW_UTILIZATION": (
        dict(device="cuda:0", free_gib=40.5, total_gib=79.19, gpu_memory_utilization=0.9, requested_gib=71.27),
        "gpu_memory_held_by_others",
    ),
    "CANNOT_AUTO_FIT": ({}, "no_cache_blocks"),
    # the same failures as older vLLM releases word them (kvtool plan --vllm-version)
    "MAX_SEQ_LEN_ABOVE_BLOCKS": (dict(max_model_len=32768, kv_cache_tokens=20480), "kv_cache_too_small_at_startup"),
    "KV_CACHE_TOO_SMALL_GB": (
        dict(max_model_len=32768, needed_gib="4.00", available_gib="2.50"),
        "kv_cache_too_small_at_startup",
    ),
    "KV_CACHE_TOO_SMALL_ESTIMATE": (
        dict(
            max_model_len=32768,
            needed_gib="4.0",
            available_gib="2.5",
            estimate=20480,
            url_sentence=messages.url_sentence(),
        ),
        "kv_cache_too_small_at_startup",
    ),
    "FREE_MEMORY_BELOW_UTILIZATION_V1": (
        dict(free_gib=40.5, total_gib=79.19, gpu_memory_utilization=0.9, requested_gib=71.27),
        "gpu_memory_held_by_others",
    ),
    "WEIGHTS_DO_NOT_FIT": (
        dict(prefix=messages.WEIGHTS_DO_NOT_FIT_PREFIX, tried_gib=1.96, device="GPU 0", total_gib=79.19, free_gib=1.12),
        "cuda_oom_startup",
    ),
}
# Not failures: diagnose reads them for context only.
LOG_LINES = {"KV_CACHE_SIZE_LOG", "V0_BLOCKS_LOG", "CONCURRENCY_LOG", "KV_TOKENS_LOG"}
# Request validation outside memory and length (a bad temperature, an unknown token id): a 400 that names
# the field, with no memory or length cause for diagnose to explain (it may still name another cause).
NOT_MEMORY_OR_LENGTH = {
    "QUANTIZATION_NEEDS_GGUF",
    "QUANTIZATION_NEEDS_CPU",
    "QUANTIZATION_DTYPE",
    "BF16_EMULATED_NOTE",  # a start-up note about speed, not a failure
    "SHARED_MEMORY_BELOW_MAX_SEQ_LEN",  # 0.2.0 - 0.2.1: the attention kernel's shared memory, not the KV cache
    "GGUF_TYPE_UNSUPPORTED",
    "GGUF_ARCH_UNKNOWN",
    "TOKEN_OUT_OF_VOCAB",
    "TOKEN_IDS_OUT_OF_VOCAB",
    "LOGIT_BIAS_KEYS_NOT_INT",
    "FIELDS_IGNORED_LOG",
    "STRUCTURED_MULTIPLE_KINDS",
    "STRUCTURED_NO_KIND",
    "GRAMMAR_NOT_COMPILED",
    "GRAMMAR_INVALID",
    "JSON_GRAMMAR_INVALID",
    "STRUCTURAL_TAG_NOT_SUPPORTED",
    "TOOL_NOT_PASSED",
    "N_BELOW_ONE",
    "MIN_TOKENS_NEGATIVE",
    "MIN_TOKENS_OVER_MAX",
    "TEMPERATURE_NOT_FINITE",
    "TEMPERATURE_NEGATIVE",
    "TEMPERATURE_RANGE",
    "TOP_P_RANGE",
    "TOP_K_RANGE",
    "MIN_P_RANGE",
    "PENALTY_RANGE",
    "REPETITION_PENALTY_NOT_FINITE",
    "REPETITION_PENALTY_NOT_POSITIVE",
    "LOGPROBS_NEGATIVE",
    "LOGPROBS_OVER_MAX",
    "PROMPT_LOGPROBS_NEGATIVE",
    "PROMPT_LOGPROBS_OVER_MAX",
    "LOGPROB_TOKEN_IDS_TOO_MANY",
    "LOGPROB_TOKEN_IDS_OUT_OF_VOCAB",
    "LOGPROB_TOKEN_IDS_LOGPROBS_MISMATCH",
    "FIELD_NOT_POSITIVE_OR_MINUS_ONE",
    "SEED_RANGE",
    "TEXT_NOT_ENCODABLE",
    "FIELD_NOT_SUPPORTED",
    "REQUEST_FAILED_IN_STEP",
    "NO_CHAT_TEMPLATE",
    # the Responses and Decisions APIs
    "RESPONSE_NOT_FOUND",
    "RESPONSE_NOT_STREAMED",
    "NAMED_TOOL_AMBIGUOUS",
    "INPUT_ITEM_UNSUPPORTED",
    "INPUT_ITEM_INVALID",
    "INPUT_PART_NOT_TEXT",
    "TOOL_TYPE_NOT_SUPPORTED",
    "TOOL_CHOICE_NOT_SUPPORTED",
    "TOOL_PARAMETERS_NOT_OBJECT",
    "DECISIONS_TOO_MANY_QUESTIONS",
    "DECISIONS_TOO_MANY_CHOICES",
    "DECISIONS_LABEL_NOT_ONE_TOKEN",
    "TOOL_DEFS_NOT_OBJECT",
    "TOOL_DEFS_CONFLICT",
    "UNEXPECTED_TEMPLATE_KWARGS",
    "CONTENT_PART_NEEDS_MULTIMODAL",
    "CONTENT_PART_UNSUPPORTED",
    "PROMPT_EMBEDS_HIDDEN_SIZE",
    "PROMPT_EMBEDS_NOT_2D",
    "PROMPT_EMBEDS_NOT_BASE64",
    "PROMPT_EMBEDS_NOT_FLOAT",
    "PROMPT_EMBEDS_NOT_LOADED",
    "PROMPT_EMBEDS_PLACEHOLDER_IN_TEXT",
    "PROMPT_EMBEDS_PLACEHOLDER_REPEATED",
    "PROMPT_EMBEDS_TOO_LARGE",
    "PROMPT_EMBEDS_TOO_MANY",
}


def templates() -> dict[str, str]:
    return {
        name: value for name, value in vars(messages).items() if name.isupper() and "{" in str(value) or name in CASES
    }


def test_every_template_has_a_round_trip_case():
    assert set(templates()) - LOG_LINES - NOT_MEMORY_OR_LENGTH == set(CASES)


@pytest.mark.parametrize("name", sorted(NOT_MEMORY_OR_LENGTH))
def test_diagnose_names_no_memory_cause_for_a_validation_message(name):
    fields = re.findall(r"{(\w+)", getattr(messages, name))
    text = getattr(messages, name).format(**{field: 7 for field in fields})
    assert not {f.category for f in diagnose_text(text).findings} & MEMORY_AND_LENGTH_CATEGORIES


def test_diagnose_recognises_each_template_from_the_template_itself():
    own = {wording.template: wording.category for wording in wordings.OWN}
    assert {getattr(messages, name): category for name, (_, category) in CASES.items()} == own


def as_logged(text: str) -> str:
    """The message as a server log shows it when pasted from a narrow terminal."""
    return "\n".join("(APIServer pid=1) ERROR 05-01 14:39:06 [serve.py:85] " + line for line in textwrap.wrap(text, 60))


@pytest.mark.parametrize("form", [str, as_logged], ids=["as raised", "wrapped and prefixed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_recognises_the_message_with_its_numbers(name, form):
    values, category = CASES[name]
    text = form(getattr(messages, name).format(**values))
    findings = [f for f in diagnose_text(text).findings if f.category == category]
    assert findings, f"{name} is not recognised as {category}: {text}"
    numbers_in_text = {float(n) for n in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text)}
    numeric_values = {
        float(v) for v in values.values() if isinstance(v, (int, float)) or str(v).replace(".", "").isdigit()
    }
    read = {float(v) for v in findings[0].numbers.values() if isinstance(v, (int, float))}
    assert numeric_values <= numbers_in_text  # the template prints every number it is given
    assert numeric_values <= read, f"{name}: numbers {numeric_values - read} not read from: {text}"
