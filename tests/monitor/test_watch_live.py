"""`kvtool watch` and `kvtool diagnose --url` on a real `kvtool serve` whose KV cache is too small for the
`kvtool bench` load it is under: the preemptions show in the window and raise the alert."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

pytestmark = pytest.mark.slow
runner = CliRunner()
# 8 MiB of KV cache is 11 blocks of 16 tokens (the default quantized SmolLM2 keeps it in float32); four requests
# of 16 + 48 tokens need 4 blocks each
SMALL_CACHE = ("--max-model-len", "128", "--max-num-seqs", "8", "--kv-cache-memory", "8MiB")
LOAD = ("-n", "4", "--input-len", "16", "--output-len", "48", "--ignore-eos", "--seed", "7")


@pytest.fixture(scope="module")
def preempting_server(kvtool_server_process, tmp_path_factory, smollm2_dir):
    server = kvtool_server_process(tmp_path_factory.mktemp("preempting") / "serve.log", *SMALL_CACHE)
    try:
        yield server.base_url
    finally:
        server.stop()


def watch_until_preempted(url: str, bench: subprocess.Popen, tries: int = 60) -> dict | None:
    """`watch --once --json` repeatedly while the load runs; the first snapshot with the preemption alert."""
    for _ in range(tries):
        result = runner.invoke(app, ["watch", url, "--json", "--interval", "1.5"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        if any(alert["name"] == "VllmPreemptions" for alert in data["alerts"]) or bench.poll() is not None:
            return data
    return None


def test_watch_reports_preemptions_under_bench_load(preempting_server):
    bench = subprocess.Popen(
        [sys.executable, "-m", "kvtool", "bench", "--url", preempting_server, *LOAD],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        data = watch_until_preempted(preempting_server, bench)
        diagnosis = runner.invoke(app, ["diagnose", "--url", preempting_server, "--json"])
    finally:  # the rest of the load is not needed
        bench.terminate()
        bench.wait(timeout=60)
    assert data is not None and data["preemptions_in_window"] > 0 and data["preemptions_per_s"] > 0
    alert = next(alert for alert in data["alerts"] if alert["name"] == "VllmPreemptions")
    assert alert["severity"] == "critical" and alert["value"] == data["preemptions_in_window"]
    # 176 cache tokens hold one sequence of max_model_len 128
    assert alert["fix"].startswith("--max-num-seqs 1 ")
    assert data["cache_config"]["num_gpu_blocks"] == "11" and data["max_model_len"] == 128
    assert diagnosis.exit_code == 0, diagnosis.output
    finding = next(f for f in json.loads(diagnosis.output)["findings"] if f["category"] == "preemption")
    assert finding["numbers"]["num_preemptions"] >= data["preemptions_in_window"]
