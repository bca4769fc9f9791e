"""`kvtool alerts`: rules load as YAML, every expression parses as PromQL and names only metrics the
version exports; the dashboard's queries too. The checklist fires on the static pages as it should."""

import json

import promql_parser
import pytest
import yaml
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.monitor.alerts import evaluate
from kvtool.monitor.page import parse_page
from kvtool.monitor.window import Reading, snapshot
from tests.monitor.conftest import PAGES

runner = CliRunner()
PAGE = {"v0": "vllm_v0_6_3.prom", "v1": "vllm_v1_0_33.prom"}


def selectors(node):
    """Every vector selector in a parsed PromQL expression."""
    if isinstance(node, promql_parser.VectorSelector):
        yield node
    for attr in ("lhs", "rhs", "expr", "vector_selector", "param"):
        if (child := getattr(node, attr, None)) is not None:
            yield from selectors(child)
    for child in getattr(node, "args", None) or []:
        yield from selectors(child)


def exported_samples(version: str) -> set[str]:
    """Sample names on the version's page (vLLM's format; kvtool serve's page shares V1's names)."""
    return set(parse_page((PAGES / PAGE[version]).read_text()).samples)


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_rules_are_prometheus_rule_files_over_exported_metrics(version):
    result = runner.invoke(app, ["alerts", "--vllm-version", version])
    assert result.exit_code == 0, result.output
    rules = yaml.safe_load(result.output)["groups"][0]["rules"]
    names = {rule["alert"] for rule in rules}
    assert {
        "VllmKvCacheFull",
        "VllmKvCacheNearFull",
        "VllmPreemptions",
        "VllmRequestsWaiting",
        "VllmTtftP99High",
    } <= names
    assert ("VllmCpuSwap" in names) == (version == "v0")
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["runbook"]
        used = {selector.name for selector in selectors(promql_parser.parse(rule["expr"]))}
        assert used and used <= exported_samples(version), rule["expr"]
    by_name = {rule["alert"]: rule for rule in rules}
    assert by_name["VllmPreemptions"]["expr"].endswith("(increase(vllm:num_preemptions_total[5m])) > 0")
    assert by_name["VllmKvCacheNearFull"]["expr"].endswith("> 0.9")
    assert by_name["VllmKvCacheFull"]["expr"].endswith(">= 0.95")


def test_kv_rules_use_each_versions_gauge():
    v0 = runner.invoke(app, ["alerts", "--vllm-version", "v0"]).output
    v1 = runner.invoke(app, ["alerts", "--ttft-p99", "0.5"]).output
    assert "vllm:gpu_cache_usage_perc" in v0 and "vllm:kv_cache_usage_perc" not in v0
    assert "vllm:kv_cache_usage_perc" in v1 and "vllm:gpu_cache_usage_perc" not in v1
    assert "rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 0.5" in v1


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_grafana_dashboard_queries_parse_and_name_exported_metrics(version):
    result = runner.invoke(app, ["alerts", "--format", "grafana", "--vllm-version", version])
    assert result.exit_code == 0, result.output
    board = json.loads(result.output)
    titles = [panel["title"] for panel in board["panels"]]
    assert "KV-cache usage" in titles and "Time to first token" in titles
    for panel in board["panels"]:
        for target in panel["targets"]:
            used = {s.name for s in selectors(promql_parser.parse(target["expr"]))}
            assert used and used <= exported_samples(version), target["expr"]


def test_checklist_fires_on_the_static_pages():
    v0 = snapshot("v0", [Reading(parse_page((PAGES / PAGE["v0"]).read_text()), 0.0)])
    alerts = {alert.name: alert for alert in evaluate(v0, max_model_len=4096)}
    # 0.9712 is critical, which hides the warning on the same gauge; p99 TTFT 2.2 s > 2 s; swapped 3
    assert set(alerts) == {
        "VllmKvCacheFull",
        "VllmPreemptions",
        "VllmRequestsWaiting",
        "VllmTtftP99High",
        "VllmCpuSwap",
    }
    assert alerts["VllmKvCacheFull"].severity == "critical" and alerts["VllmKvCacheFull"].value == 0.9712
    # 2710 blocks x 16 = 43,360 tokens hold 10 sequences of max_model_len 4096
    assert alerts["VllmPreemptions"].fix.startswith("--max-num-seqs 10 ")
    # 42 running + waiting requests of ~617.3 prompt tokens share 43,360 tokens: 1032 - 617.3, floored
    assert "max_tokens = 414" in alerts["VllmPreemptions"].fix
    v1 = snapshot("v1", [Reading(parse_page((PAGES / PAGE["v1"]).read_text()), 0.0)])
    assert {alert.name for alert in evaluate(v1)} == {"VllmKvCacheNearFull", "VllmPreemptions", "VllmRequestsWaiting"}
