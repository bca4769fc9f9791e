"""Failures as people paste them: wrapped by a terminal or an issue tracker, behind log prefixes,
quoted in Markdown, inside JSON or a Python repr, with the first characters cut off."""

import json
import textwrap

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.normalize import logical_lines, strip_prefix

CONTEXT_MESSAGE = """\
This model's maximum context length is 16384 tokens. However, you requested
122946 tokens (112946 in the messages, 10000 in the completion).
Please reduce the length of the messages or completion."""
KV_MESSAGE = """\
ValueError: The model's max seq len (4096) is larger than the maximum number
of tokens that can be stored in KV cache (3664). Try increasing
gpu_memory_utilization or decreasing max_model_len when initializing the engine."""
PREFIX = "(APIServer pid=1) ERROR 05-01 14:39:06 [core.py:1131] "
EXPECTED = [
    (
        CONTEXT_MESSAGE,
        "request_too_long",
        dict(max_model_len=16384, requested_tokens=122946, prompt_tokens=112946, max_tokens=10000),
    ),
    (KV_MESSAGE, "kv_cache_too_small_at_startup", dict(max_model_len=4096, kv_cache_tokens=3664)),
]


def pasted(message: str, how: str) -> str:
    lines = message.splitlines()
    return {
        "as pasted": message,
        "prefixed": "\n".join(PREFIX + line for line in lines),
        "quoted": "\n".join("> " + line for line in lines),
        "JSON body": json.dumps({"error": {"message": " ".join(lines), "type": "BadRequestError", "code": 400}}),
        "JSON, wrapped": json.dumps({"error": {"message": message, "type": "BadRequestError", "code": 400}}),
        "quoted and prefixed": "\n".join("> " + PREFIX + line for line in lines),
    }[how]


@pytest.mark.parametrize(
    "how", ["as pasted", "prefixed", "quoted", "JSON body", "JSON, wrapped", "quoted and prefixed"]
)
@pytest.mark.parametrize("message, category, numbers", EXPECTED, ids=["context_length", "kv_cache"])
def test_the_issue_messages_are_diagnosed_however_pasted(message, category, numbers, how):
    [finding] = diagnose_text(pasted(message, how)).findings
    assert finding.category == category
    assert {name: finding.numbers[name] for name in numbers} == numbers
    assert "\n" in finding.evidence or how == "JSON body"  # the evidence keeps the text as it was wrapped


@pytest.mark.parametrize(
    "line, message",
    [
        ("(APIServer pid=1) ERROR 05-01 14:39:06 [core.py:1131] boom", "boom"),
        ("(EngineCore_DP0 pid=812) INFO 10-11 12:27:29 [gpu_worker.py:157] boom", "boom"),
        ("(RayWorkerWrapper pid=5, ip=10.0.0.2) [rank0]: boom", "boom"),
        ("INFO 05-05 10:00:00 metrics.py:351] boom", "boom"),
        ("2025-05-01T14:39:06.123456789Z ERROR 05-01 14:39:06 [core.py:1] boom", "boom"),
        ("vllm-1  | INFO 05-01 14:39:06 [core.py:1] boom", "boom"),
        ("[pod/vllm-0/vllm] ERROR:root:boom", "boom"),
        ("> > ▎ boom", "boom"),
        ("│ boom  │", "boom"),
        ("- boom", "boom"),
        ("ERROR:vllm.entrypoints.openai.api_server:boom", "boom"),
        ("2025-05-01 14:39:06,123 - vllm - ERROR - boom", "boom"),
    ],
)
def test_prefixes_are_stripped(line, message):
    assert strip_prefix(line)[1] == message


def text_of(raw: str) -> list[str]:
    return [text for text, _ in logical_lines([raw.splitlines()])]


def test_wrapped_lines_join_but_records_and_traceback_frames_do_not():
    raw = (
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/worker/model_runner.py", line 1, in profile_run\n'
        "    self.execute_model(model_input, kv_caches, intermediate_tensors)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25\n"
        "GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.\n"
        "INFO 05-01 14:39:06 [core.py:1] next record\n"
    )
    lines = text_of(raw)
    assert lines[3] == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 1.02 GiB is free."
    )  # a number re-joined with its unit
    assert lines[:3] == [
        "Traceback (most recent call last):",
        'File "/x/vllm/worker/model_runner.py", line 1, in profile_run',
        "self.execute_model(model_input, kv_caches, intermediate_tensors)",
    ]
    assert lines[4] == "next record"


def test_code_fences_blank_lines_and_different_prefixes_end_a_logical_line():
    raw = (
        "```\nThis line is long enough to have been wrapped by the tracker here\n```\n"
        "INFO 05-01 14:39:06 [a.py:1] first record that is long enough to wrap\n"
        "INFO 05-01 14:39:07 [b.py:2] second record\n"
    )
    assert text_of(raw) == [
        "This line is long enough to have been wrapped by the tracker here",
        "first record that is long enough to wrap",
        "second record",
    ]


def test_json_log_lines_reprs_and_html_entities_are_unescaped():
    raw = (
        '{"log":"ERROR 05-01 14:39:06 [core.py:1] Traceback\\nValueError: This model\\u0027s maximum\\n",'
        '"stream":"stderr"}\n\n'
        "OutOfMemoryError('CUDA out of memory. It\\'s over')\n\n"
        "This model&#39;s maximum &quot;context&quot;\n"
    )
    lines = text_of(raw)
    assert "ValueError: This model's maximum" in lines
    assert "OutOfMemoryError('CUDA out of memory. It's over')" in lines
    assert 'This model\'s maximum "context"' in lines


def test_a_first_line_cut_off_is_still_recognised():
    cut = (
        "del's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, "
        "1000 in the completion)."
    )
    [finding] = diagnose_text(cut).findings
    assert finding.numbers["prompt_tokens"] == 8000
    cut = "put length (40000) exceeds model's maximum context length (32768)."
    assert diagnose_text(cut).findings[0].numbers["prompt_tokens"] == 40000


def test_a_cut_word_that_the_message_needs_is_not_guessed():
    assert not diagnose_text("n must be at least 1, got 0.").findings


def test_two_messages_on_one_joined_line_are_both_read():
    text = (
        "ERROR 05-01 14:39:06 [serving.py:1] Input length (40000) exceeds model's maximum context length (32768).\n"
        "ERROR 05-01 14:39:06 [serving.py:1] Input length (50000) exceeds model's maximum context length (32768).\n"
    )
    [finding] = diagnose_text(text).findings
    assert finding.numbers["occurrences"] == 2 and finding.numbers["prompt_tokens"] == 50000


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)) * 64,
        b"\xff\xfe\xfd" * 1000 + b"\n",
        b"x" * (1 << 20),
        b"\\" * (1 << 20),
        b"\\n" * (1 << 19),
        b"&#" * (1 << 19),
        b">" * (1 << 20),
        b"maximum context length " * 40000,
        "\u2588\n".encode() * 100000,
    ],
)
def test_odd_input_never_raises(data):
    for finding in diagnose_text(data).findings:
        finding.to_dict()


KV_LINE = (
    "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (9.63 GiB). Based on the available memory, the estimated "
    "maximum model length is 78848. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine."
)
KV_NUMBERS = dict(max_model_len=131072, kv_needed_gib=16.0, kv_available_gib=9.63, estimated_max_model_len=78848)


def hard_wrapped(text: str, width: int) -> str:
    return "".join(text[i : i + width] + "\n" for i in range(0, len(text), width))


@pytest.mark.parametrize(
    "text",
    [
        hard_wrapped(PREFIX + KV_LINE, 140),  # a terminal's fixed width, cut mid-word and mid-number
        hard_wrapped(PREFIX + KV_LINE, 136) * 2,
        "\n\n".join(PREFIX + line for line in textwrap.wrap(KV_LINE, 90)),  # double spacing
        KV_LINE.replace(", which is larger", ",<br>which is larger").replace("Based on", "<br/>Based on"),
        "(APIServer pid=1) INFO 05-01 14:39:00 [api_server.py:1] vLLM API server version 0.20.0" + PREFIX + KV_LINE,
        KV_LINE.replace("model's", "model\u2019s").replace("`", "\u201c"),
    ],
    ids=["hard wrap 140", "hard wrap 136 twice", "double spacing", "html br", "lost line breaks", "curly quotes"],
)
def test_paste_layouts_are_undone(text):
    findings = diagnose_text(text).findings
    assert [f.category for f in findings] == ["kv_cache_too_small_at_startup"]
    assert {name: findings[0].numbers[name] for name in KV_NUMBERS} == KV_NUMBERS


def test_the_evidence_keeps_the_quotes_as_pasted():
    [finding] = diagnose_text(KV_LINE.replace("model's", "model\u2019s")).findings
    assert "model\u2019s" in finding.evidence


def test_a_soft_wrap_of_equal_lines_is_not_a_hard_wrap():
    text = "\n".join(PREFIX + line for line in CONTEXT_MESSAGE.splitlines()) + "\n"
    [finding] = diagnose_text(text * 3).findings
    assert finding.numbers["requested_tokens"] == 122946


@pytest.mark.parametrize(
    "text, numbers",
    [
        (
            "ValueError: The model's max seq len (32768) is larger than ... KV cache (20944). Try increasing",
            dict(max_model_len=32768, kv_cache_tokens=20944),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested \u2026 (9000 in the messages, "
            "1000 in the completion).",
            dict(max_model_len=8192, prompt_tokens=9000, max_tokens=1000),
        ),
    ],
)
def test_a_message_with_words_left_out_is_read_from_the_words_around_its_numbers(text, numbers):
    [finding] = diagnose_text(text).findings
    assert {name: finding.numbers[name] for name in numbers} == numbers


def test_an_elision_in_prose_with_numbers_is_not_a_message():
    assert not diagnose_text("We tried 4096 tokens ... and then 8192 tokens, with max seq len unchanged.").findings


def test_a_message_cut_at_the_end_of_a_sentence_or_after_its_last_number():
    cut = "ValueError: To serve at least one request with the model's max seq len (1048576),\n9.8 GiB KV cache is needed, which is larger than the available KV cache memory (4.81 GiB).\n"
    [finding] = diagnose_text(cut).findings
    assert (finding.numbers["kv_needed_gib"], finding.numbers["kv_available_gib"]) == (9.8, 4.81)
    [finding] = diagnose_text(KV_LINE.split(". Try")[0].removesuffix(".")).findings
    assert finding.numbers["estimated_max_model_len"] == 78848
