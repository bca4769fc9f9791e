"""`kvtool alerts`: the monitoring checklist as Prometheus alerting rules or a Grafana dashboard."""

import json
from enum import Enum
from typing import Annotated

import typer


class Format(str, Enum):
    prometheus = "prometheus"
    grafana = "grafana"


class VllmVersion(str, Enum):
    v1 = "v1"
    v0 = "v0"


def alerts(
    vllm_version: Annotated[
        VllmVersion, typer.Option(help="Metric names of vLLM's V1 engine (0.8+) or V0 (up to 0.10).")
    ] = VllmVersion.v1,
    output_format: Annotated[
        Format, typer.Option("--format", help="Prometheus rules (YAML) or a Grafana dashboard (JSON).")
    ] = Format.prometheus,
    ttft_p99: Annotated[float, typer.Option(min=0.0, help="p99 TTFT objective in seconds (alert above it).")] = 2.0,
) -> None:
    """Print alerting rules for KV-cache usage, preemptions, waiting requests, TTFT and CPU swap.

    [dim]Load with Prometheus' rule_files (or `promtool check rules`); import the dashboard in Grafana.[/dim]
    """
    from kvtool.monitor.rules import dashboard, rules_document

    if output_format is Format.grafana:
        print(json.dumps(dashboard(vllm_version.value), indent=2))
        return
    import yaml

    print(yaml.safe_dump(rules_document(vllm_version.value, ttft_p99), sort_keys=False, width=1000), end="")
