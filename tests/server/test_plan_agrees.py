"""One source of truth: `kvtool plan` predicts the KV cache that the real `kvtool serve` then reports."""

import json
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_plan_prints_the_numbers_serve_logs(kvtool_server_handle):
    log = open(kvtool_server_handle.log_path).read()
    match = re.search(
        r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
        r"([\d.]+)x",
        log,
    )
    assert match, log[-2000:]
    served_tokens, served_len, served_concurrency = (
        int(match[1].replace(",", "")),
        int(match[2].replace(",", "")),
        match[3],
    )
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvtool",
            "plan",
            "--model",
            "smollm2",
            "--max-model-len",
            "512",
            "--kv-cache-memory",
            "64MiB",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plan.returncode == 0, plan.stderr
    report = json.loads(plan.stdout)
    assert (report["kv_cache_tokens"], report["max_model_len"]) == (served_tokens, served_len)
    assert f"{report['max_concurrency']:.2f}" == served_concurrency
