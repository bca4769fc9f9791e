"""The checklist as Prometheus alerting rules, and a Grafana dashboard over the same metrics."""

from kvtool.monitor.checklist import KV_USAGE_CRITICAL, KV_USAGE_WARNING, RULE_WINDOW, checks_for
from kvtool.monitor.names import V0, name

RATE_WINDOW = "1m"


def rules_document(version: str, ttft_objective: float) -> dict:
    """`groups:` / `rules:` as Prometheus loads them (`promtool check rules` format)."""
    rules = [
        {
            "alert": check.alert,
            "expr": check.expr(version, ttft_objective),
            "for": check.duration,
            "labels": {"severity": check.severity},
            "annotations": {
                "summary": check.summary,
                "description": "{{ $labels.model_name }}: {{ $value }}",
                "runbook": check.runbook(),
            },
        }
        for check in checks_for(version)
    ]
    return {"groups": [{"name": f"vllm-{version}-kv-cache", "rules": rules}]}


def panel_queries(version: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(title, unit, [(PromQL, legend)]) for each dashboard panel."""

    def quantiles(key: str) -> list[tuple[str, str]]:
        buckets = name(key, version) + "_bucket"
        return [
            (
                f"histogram_quantile({q}, sum by (le, model_name) (rate({buckets}[{RATE_WINDOW}])))",
                f"p{q * 100:g} {{{{model_name}}}}",
            )
            for q in (0.5, 0.99)
        ]

    def rate(key: str) -> str:
        return f"sum by (model_name) (rate({name(key, version)}[{RATE_WINDOW}]))"

    requests = [
        (f"sum by (model_name) ({name(k, version)})", f"{k.split('_')[-1]} {{{{model_name}}}}")
        for k in ("num_requests_running", "num_requests_waiting")
    ]
    if version == V0:
        requests.append((f"sum by (model_name) ({name('num_requests_swapped', V0)})", "swapped {{model_name}}"))
        hit_rate = [(f"max by (model_name) ({name('prefix_cache_hit_rate', V0)})", "{{model_name}}")]
    else:
        hit_rate = [(f"{rate('prefix_cache_hits')} / {rate('prefix_cache_queries')}", "{{model_name}}")]
    panels = [
        (
            "KV-cache usage",
            "percentunit",
            [(f"max by (model_name) ({name('kv_cache_usage', version)})", "{{model_name}}")],
        ),
        ("Requests", "short", requests),
        (
            f"Preemptions per {RULE_WINDOW}",
            "short",
            [(f"sum by (model_name) (increase({name('num_preemptions', version)}[{RULE_WINDOW}]))", "{{model_name}}")],
        ),
        (
            "Tokens per second",
            "short",
            [
                (rate("prompt_tokens"), "prompt {{model_name}}"),
                (rate("generation_tokens"), "generation {{model_name}}"),
            ],
        ),
        ("Time to first token", "s", quantiles("ttft")),
        ("Inter-token latency", "s", quantiles("itl")),
        ("Prefix-cache hit rate", "percentunit", hit_rate),
    ]
    if version == V0:
        panels.append(
            (
                "CPU swap space usage",
                "percentunit",
                [(f"max by (model_name) ({name('cpu_cache_usage', V0)})", "{{model_name}}")],
            )
        )
    return panels


def dashboard(version: str) -> dict:
    """A Grafana dashboard (JSON model, schema 39) with one time-series panel per quantity."""
    source = {"type": "prometheus", "uid": "${datasource}"}
    panels = []
    for index, (title, unit, queries) in enumerate(panel_queries(version)):
        panels.append(
            {
                "id": index + 1,
                "type": "timeseries",
                "title": title,
                "datasource": source,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": unit, **_kv_thresholds(title)}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": source}
                    for i, (expr, legend) in enumerate(queries)
                ],
            }
        )
    variable = {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
    return {
        "title": f"vLLM KV cache and latency ({version.upper()} metric names)",
        "uid": f"kvtool-vllm-{version}",
        "schemaVersion": 39,
        "tags": ["vllm", "kvtool"],
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "templating": {"list": [variable]},
        "panels": panels,
    }


def _kv_thresholds(title: str) -> dict:
    if title != "KV-cache usage":
        return {}
    steps = [
        {"color": "green", "value": None},
        {"color": "orange", "value": KV_USAGE_WARNING},
        {"color": "red", "value": KV_USAGE_CRITICAL},
    ]
    return {
        "min": 0,
        "max": 1,
        "thresholds": {"mode": "absolute", "steps": steps},
        "custom": {"thresholdsStyle": {"mode": "line"}},
    }
