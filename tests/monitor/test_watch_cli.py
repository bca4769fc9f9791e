"""`kvtool watch` and `kvtool diagnose --url` against a real HTTP server serving the static V0 and V1 pages."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

runner = CliRunner()


def test_watch_json_has_every_value_and_the_alerts(page_server):
    result = runner.invoke(app, ["watch", f"{page_server}/v1", "--json", "--interval", "0.1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["url"] == f"{page_server}/v1/metrics" and data["max_model_len"] == 8192
    assert (data["vllm_version"], data["num_engines"], data["kv_cache_usage"]) == ("v1", 2, 0.9125)
    assert data["preemptions_in_window"] == 0 and data["generation_tokens_per_s"] == 0  # a static page: no change
    assert data["ttft_p99_s"] is None  # nothing observed in the window
    alerts = {alert["name"]: alert for alert in data["alerts"]}
    assert set(alerts) == {"VllmKvCacheNearFull", "VllmRequestsWaiting"}
    assert set(alerts["VllmKvCacheNearFull"]) == {"name", "severity", "summary", "value", "fix"}
    # 4096 blocks x 16 tokens per engine hold 8 sequences of 8192 tokens
    assert alerts["VllmKvCacheNearFull"]["fix"].startswith("--max-num-seqs 8 ")


def test_watch_once_renders_the_view(page_server):
    result = runner.invoke(
        app, ["watch", f"{page_server}/v0/metrics", "--once", "--interval", "0.1"], env={"COLUMNS": "140"}
    )
    assert result.exit_code == 0, result.output
    assert "V0 names" in result.output and "meta-llama/Llama-3.1-8B-Instruct" in result.output
    assert "97.1% now" in result.output and "swapped 3" in result.output and "CPU swap space" in result.output
    assert (
        "CRITICAL" in result.output
        and "VllmKvCacheFull" in result.output
        and "VllmKvCacheNearFull" not in result.output
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/html", "is not Prometheus text"),
        ("/plain", "has no vLLM metrics"),
        ("/nothing", "answered HTTP 404"),
    ],
)
def test_a_url_without_vllm_metrics_is_one_line(page_server, path, message):
    result = runner.invoke(app, ["watch", page_server + path, "--once", "--interval", "0.1"])
    assert result.exit_code == 2 and "kvtool: error:" in result.stderr and message in result.stderr


def test_api_key_is_sent_as_a_bearer_token(page_server):
    refused = runner.invoke(app, ["watch", f"{page_server}/secure", "--once", "--interval", "0.1"])
    assert refused.exit_code == 2 and "Pass the server's --api-key" in refused.stderr
    result = runner.invoke(
        app, ["watch", f"{page_server}/secure", "--json", "--interval", "0.1", "--api-key", "sesame"]
    )
    assert result.exit_code == 0 and json.loads(result.output)["num_engines"] == 2


def test_unreachable_server_exits_2_with_one_line():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "kvtool", "watch", "http://127.0.0.1:9", "--once"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no server answers at http://127.0.0.1:9/metrics" in done.stderr


def test_diagnose_url_reports_preemption_and_a_full_cache_as_findings(page_server):
    result = runner.invoke(app, ["diagnose", "--url", f"{page_server}/v0", "--json"])
    assert result.exit_code == 0, result.output
    findings = {f["category"]: f for f in json.loads(result.output)["findings"]}
    assert set(findings) == {"preemption", "kv_cache_near_full"}
    preemption = findings["preemption"]
    assert preemption["stage"] == "runtime" and preemption["numbers"]["num_preemptions"] == 12
    assert "vllm:num_preemptions_total 12" in preemption["evidence"]
    fixes = [(fix.get("flag") or fix.get("param"), fix["value"]) for fix in preemption["fixes"]]
    # no max_model_len known (no /v1/models): three quarters of the 37 running; 43,360 cache tokens shared by the
    # 42 running and waiting requests of ~617 prompt tokens; Llama-3.1-8B from the catalog: fp8 doubles the tokens
    assert fixes[:2] == [("--max-num-seqs", 27), ("max_tokens", 414)] and ("--kv-cache-dtype", "fp8") in fixes
    assert findings["kv_cache_near_full"]["numbers"]["kv_cache_usage"] == 0.9712


def test_diagnose_url_with_a_log_is_a_usage_error(page_server, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("nothing\n")
    result = runner.invoke(app, ["diagnose", str(log), "--url", page_server + "/v1"])
    assert result.exit_code == 2 and "a log or --url, not both" in result.stderr
