"""Failures as people paste them: wrapped by a terminal or an issue tracker, behind log prefixes,
quoted in Markdown, inside JSON or a Python repr, with the first characters cut off."""

import json

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
