"""Whatever comes in (nothing, garbage, huge lines, random text around real messages) never raises."""

import importlib.util
import io
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.engine.diagnosis import diagnose, diagnose_text, reader

_spec = importlib.util.spec_from_file_location("large_log", Path(__file__).with_name("large_log.py"))
large_log = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(large_log)

KV_MESSAGE = (
    "ValueError: To serve at least one request with the model's max seq len (32768), (4.0 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (2.5 GiB). Based on the available memory, "
    "the estimated maximum model length is 20464."
)
# Fragments of real messages, so random text reaches the regexes and the explainers, not just the prefilter.
FRAGMENTS = [
    "max seq len (",
    "maximum context length is ",
    " tokens. However, you requested ",
    "max_tokens=",
    "cannot be greater than max_model_len=",
    "CUDA out of memory. Tried to allocate ",
    " GiB",
    "MiB",
    "total capacity of ",
    "Free memory on device (",
    "# GPU blocks: ",
    "KV cache usage: 9",
    "Preemptions: ",
    'finish_reason": "length"',
    'completion_tokens": 16',
    "vllm serve ",
    "--max-model-len ",
    "\n",
    "\r",
    "\x1b[31m",
    "(VllmWorker rank=0 pid=1) ",
    "-1",
    "0",
    "99999999999999999999",
    "1e308",
    "nan",
    ".",
]


def test_empty_input_finds_nothing():
    assert diagnose_text(b"").findings == []


def test_binary_garbage_finds_nothing():
    garbage = bytes(range(256)) * 4096
    assert diagnose_text(garbage).findings == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_random_bytes_never_raise(data):
    diagnose(io.BytesIO(data))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=60))
def test_random_text_built_from_message_fragments_never_raises(parts):
    for finding in diagnose_text("".join(parts)).findings:
        finding.to_dict()


def test_a_size_without_digits_is_no_size():
    """'. GiB' once reached float() as a size (found by the fragments property test); the same line with digits
    is still read."""
    line = "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of {total} of which 1.5 GiB is free."
    diagnose_text(line.format(total=". GiB"))
    numbers = diagnose_text(line.format(total="23.5 GiB")).findings[0].numbers
    assert numbers["total_gib"] == 23.5 and numbers["free_gib"] == 1.5


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_a_real_message_inside_random_text_is_still_found(before, after):
    text = before + "\n" + KV_MESSAGE + "\n" + after.replace("\n", " ")
    categories = [finding.category for finding in diagnose_text(text).findings]
    assert "kv_cache_too_small_at_startup" in categories


def test_a_10_mb_line_with_the_message_at_its_end():
    line = b"x" * (10 << 20) + b" " + KV_MESSAGE.encode()
    findings = diagnose_text(line).findings
    assert [f.category for f in findings] == ["kv_cache_too_small_at_startup"]
    assert findings[0].numbers["estimated_max_model_len"] == 20464
    assert len(findings[0].evidence) < 2000


def test_a_10_mb_line_made_of_messages_stays_bounded():
    message = b"This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. "
    line = message * ((10 << 20) // len(message))
    findings = diagnose_text(line).findings
    assert [f.category for f in findings] == ["request_too_long"]
    chunks = -(-len(line) // reader.CHUNK_BYTES)
    assert findings[0].numbers["occurrences"] <= reader.MAX_WINDOWS * chunks  # windows per chunk are capped


def test_extreme_numbers_do_not_break_the_arithmetic():
    text = (
        "This model's maximum context length is 0 tokens. However, you requested 99999999999999999999 tokens "
        "(99999999999999999999 in the messages, 0 in the completion).\n"
        "Free memory on device (0.0/0.0 GiB) on startup is less than desired GPU memory utilization (0.9, 0.0 GiB)\n"
        "To serve at least one request with the models's max seq len (0), (0.00 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (0.00 GiB)."
    )
    for finding in diagnose_text(text).findings:
        finding.to_dict()


@pytest.mark.slow
def test_a_50_mb_log_is_streamed_in_bounded_memory(tmp_path):
    log = large_log.write_large_log(tmp_path / "server.log", megabytes=50)
    tracemalloc.start()
    with open(log, "rb") as stream:
        findings = diagnose(stream).findings
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [finding.category for finding in findings] == large_log.PLANTED_CATEGORIES
    assert peak < 32 << 20, f"peak {peak >> 20} MiB while reading {log.stat().st_size >> 20} MiB"
