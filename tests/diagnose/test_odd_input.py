"""Odd input (binary, NUL bytes, invalid UTF-8, only whitespace, a 1 MB line) never gives a traceback, through
the CLI and through the library; a real message inside it is still found with its numbers."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.diagnosis import diagnose_text

MESSAGE = (
    b"ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored "
    b"in KV cache (3664). Try increasing gpu_memory_utilization or decreasing max_model_len when initializing "
    b"the engine."
)
ODD = {
    "binary": bytes(range(256)) * 256,
    "nul_bytes": b"\x00" * (1 << 16),
    "invalid_utf8": b"\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xff\xfe" * 5000,
    "only_whitespace": b" \t\r\n\x0b\x0c" * 20000,
    "one_mb_line": b"memory max blocks model " * (1 << 20 // 24),
    "utf16_bom_then_garbage": b"\xff\xfe" + b"\x00\xd8" * 4000,
}
# The message survives odd bytes around it and inside the line (NULs are dropped, invalid UTF-8 is replaced).
AROUND = {
    "nul_inside": MESSAGE.replace(b" (4096)", b"\x00 (4096)"),
    "invalid_utf8_before": b"\xff\xfe\xc3\x28" * 100 + b"\n" + MESSAGE,
    "after_binary": bytes(range(256)) * 16 + b"\n" + MESSAGE + b"\n" + bytes(range(256)) * 16,
    "end_of_a_1_mb_line": b"\xe2\x82" * (1 << 19) + b" " + MESSAGE,
}


@pytest.mark.parametrize("data", ODD.values(), ids=ODD.keys())
def test_odd_input_through_the_cli_exits_cleanly(data):
    result = CliRunner().invoke(app, ["diagnose", "--json"], input=data)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1)
    assert "Traceback" not in result.output
    json.loads(result.output)


@pytest.mark.parametrize("data", ODD.values(), ids=ODD.keys())
def test_odd_input_through_the_library_finds_nothing(data):
    assert diagnose_text(data).findings == []


@pytest.mark.parametrize("data", AROUND.values(), ids=AROUND.keys())
def test_a_message_among_odd_bytes_is_found_through_the_cli(data):
    result = CliRunner().invoke(app, ["diagnose", "--json"], input=data)
    assert result.exit_code == 0, result.output
    [finding] = json.loads(result.output)["findings"]
    assert finding["category"] == "kv_cache_too_small_at_startup"
    assert finding["numbers"]["max_model_len"] == 4096


@pytest.mark.parametrize("data", AROUND.values(), ids=AROUND.keys())
def test_a_message_among_odd_bytes_is_found_through_the_library(data):
    [finding] = diagnose_text(data).findings
    assert finding.category == "kv_cache_too_small_at_startup"
    assert finding.numbers["max_model_len"] == 4096
