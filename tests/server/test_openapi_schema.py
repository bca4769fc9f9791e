"""The OpenAPI document tells the truth: schemathesis, with every check, over every operation of the real server."""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent / "schemathesis"
MAX_EXAMPLES = "8"  # per operation and phase; the whole run stays under two minutes on CPU


def test_the_document_declares_every_status_and_the_stream(kvtool_server):
    document = httpx.get(f"{kvtool_server}/openapi.json").json()
    completions = document["paths"]["/v1/completions"]["post"]["responses"]
    assert {"200", "400", "401", "404", "405", "500"} <= set(completions) and "422" not in completions
    assert set(completions["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "content" not in document["paths"]["/health"]["get"]["responses"]["200"]
    assert set(document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    request = document["components"]["schemas"]["CompletionRequest"]["properties"]
    assert request["top_k"]["anyOf"][0]["minimum"] == -1 and request["seed"]["anyOf"][0]["maximum"] == 2**63 - 1


def test_schemathesis_finds_no_server_error_and_no_schema_violation(kvtool_server, tmp_path):
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "run",
        f"{kvtool_server}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        MAX_EXAMPLES,
        "--workers",
        "1",
        "--no-shrink",
        "--request-timeout",
        "120",
        "--seed",
        "14",
        "--report-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "hooks", "PYTHONPATH": str(HERE)}  # hooks.py caps max_tokens and n
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-8000:]
