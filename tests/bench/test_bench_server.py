"""`kvtool bench` against a real `kvtool serve` (SmolLM2, max_model_len 512) with small counts."""

import csv
import json
import re

import pytest
from typer.testing import CliRunner

from kvtool.bench import server_view
from kvtool.bench.client import RequestRecord
from kvtool.bench.metrics import request_tpot
from kvtool.cli.app import app

pytestmark = pytest.mark.slow
runner = CliRunner()
SMALL = ["--input-len", "8", "--output-len", "4", "--ignore-eos"]


def bench(base_url: str, *args: str):
    return runner.invoke(app, ["bench", "--url", base_url, *args])


def test_run_reports_server_usage_and_the_servers_view(kvtool_server, tmp_path, monkeypatch):
    # a run of a few hundred tokens: polls 0.2 s apart find the server busy, as its peaks need
    monkeypatch.setattr(server_view, "POLL_INTERVAL_S", 0.2)
    out, table = tmp_path / "run.json", tmp_path / "run.csv"
    # 48 output tokens: long enough for the /metrics poller to see the server busy
    result = bench(
        kvtool_server,
        "-n",
        "4",
        "--input-len",
        "8",
        "--output-len",
        "48",
        "--ignore-eos",
        "--prefix-len",
        "48",
        "--max-concurrency",
        "2",
        "--slo",
        "ttft=600s,tpot=60s",
        "--json",
        str(out),
        "--csv",
        str(table),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    summary, requests = data["summary"], data["requests"]
    assert (summary["completed"], summary["failed"]) == (4, 0)
    assert summary["total_output_tokens"] == 4 * 48 and summary["usage_missing"] == 0
    for request in requests:
        assert request["output_tokens"] == 48 and request["prompt_tokens"] >= 56
        assert sum(request["chunk_tokens"]) == request["output_tokens"]
        assert 0 < request["ttft"] <= request["latency"]
    tpots = [
        request_tpot(
            RequestRecord(
                **{k: request[k] for k in ("index", "request_id", "max_tokens", "output_tokens", "ttft", "latency")}
            )
        )
        for request in requests
    ]
    assert summary["mean_tpot_ms"] == pytest.approx(1000 * sum(tpots) / len(tpots))
    assert summary["request_goodput"] == pytest.approx(summary["request_throughput"])
    # the 48-word prefix fills three 16-token blocks that later requests find in the prefix cache
    assert data["server"]["prefix_cache_hit_rate"] > 0
    assert data["server"]["peak_kv_cache_usage"] > 0 and data["server"]["preemptions"] >= 0
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 1 and int(rows[0]["completed"]) == 4
    assert "TPOT" in result.output and "Prefix-cache hit rate" in result.output


def test_chat_endpoint_counts_the_template_tokens(kvtool_server, tmp_path):
    out = tmp_path / "chat.json"
    result = bench(kvtool_server, "--endpoint", "chat", "-n", "2", *SMALL, "--json", str(out))
    assert result.exit_code == 0, result.output
    requests = json.loads(out.read_text())["requests"]
    assert all(r["success"] and r["output_tokens"] == 4 for r in requests)
    assert all(r["prompt_tokens"] > 8 for r in requests)  # the chat template wraps the 8 words


def test_sweep_writes_a_row_per_point_and_a_chart(kvtool_server, tmp_path):
    out, chart = tmp_path / "sweep.json", tmp_path / "sweep.png"
    result = bench(
        kvtool_server, "-n", "2", *SMALL, "--sweep", "max-tokens=2,5", "--json", str(out), "--chart", str(chart)
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["sweep"] == "max-tokens"
    assert [(run["max-tokens"], run["summary"]["total_output_tokens"]) for run in data["runs"]] == [(2, 4), (5, 10)]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Sweep over max-tokens" in result.output


def test_every_request_failing_stops_early_with_the_first_error(kvtool_server):
    # 600 words do not fit max_model_len 512: the server rejects each request with HTTP 400
    result = bench(kvtool_server, "-n", "40", "--input-len", "600", "--output-len", "4", "--request-rate", "20")
    assert result.exit_code == 1
    finished = int(re.search(r"\((\d+) of 40 finished\)", result.output)[1])
    assert 5 <= finished < 40
    assert "every request failed" in result.output and "the run stopped early" in result.output
    assert "HTTP 400" in result.output and "maximum context length is 512" in result.output


def test_unknown_model_lists_the_served_ones(kvtool_server):
    result = bench(kvtool_server, "--model", "no-such-model", "-n", "1")
    assert result.exit_code == 2 and "kvtool: error:" in result.stderr
    assert "no-such-model" in result.stderr and "smollm2" in result.stderr


def test_duration_stops_sending_on_a_poisson_schedule(kvtool_server, tmp_path):
    out = tmp_path / "timed.json"
    result = bench(
        kvtool_server,
        "-n",
        "50",
        *SMALL,
        "--request-rate",
        "4",
        "--duration",
        "1",
        "--warmups",
        "1",
        "--json",
        str(out),
    )
    assert result.exit_code == 0, result.output
    requests = json.loads(out.read_text())["requests"]
    assert 1 <= len(requests) < 50
    assert all(r["send_time"] <= 1.5 for r in requests)
    assert [r["send_time"] for r in requests] == sorted(r["send_time"] for r in requests)


@pytest.mark.parametrize(("flags", "field"), [(["--top-p", "0"], "top_p"), (["--extra-body", '{"min_p": 2}'], "min_p")])
def test_sampling_flags_reach_the_server(kvtool_server, flags, field):
    # values the server refuses: its HTTP 400 names the field, which proves the field was sent
    result = bench(kvtool_server, "-n", "5", *SMALL, *flags)
    assert result.exit_code == 1 and "HTTP 400" in result.output and field in result.output


def test_fresh_seed_per_run_and_a_warning_when_the_prefix_cache_answers(kvtool_server, tmp_path):
    seeds = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        assert bench(kvtool_server, "-n", "1", *SMALL, "--json", str(out)).exit_code == 0
        seeds.append(json.loads(out.read_text())["config"]["seed"])
    assert seeds[0] != seeds[1]
    # the same --seed twice: the second run's 48-word prompts are three cached 16-token blocks
    args = ("-n", "2", "--input-len", "48", "--output-len", "2", "--seed", "123457", "--max-concurrency", "1")
    bench(kvtool_server, *args)
    again = bench(kvtool_server, *args)
    assert again.exit_code == 0, again.output
    assert "Warning: the server's prefix cache answered" in again.output and "Data seed" in again.output
