"""Results as files: JSON (config, summary, server view, per-request records) and CSV (one row per run)."""

import csv
import dataclasses
import json
import math
from pathlib import Path

from kvtool.bench.runner import BenchResult

# Per-request fields kept in JSON; the metric inputs (chunk times and token counts) are all there.
RECORD_FIELDS = (
    "index", "request_id", "success", "error", "send_time", "queue_time", "prompt_tokens", "output_tokens",
    "max_tokens", "finish_reason", "usage_reported", "ttft", "latency", "chunk_times", "chunk_tokens",
)


def _jsonable(value):
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def config_dict(result: BenchResult) -> dict:
    config = dataclasses.asdict(result.config)
    config["dataset"] = {"kind": type(result.config.dataset).__name__, **config["dataset"]}
    return _jsonable(config)


def result_dict(result: BenchResult, with_requests: bool = True) -> dict:
    data = {"model": result.model, "config": config_dict(result), "summary": result.summary, "server": result.server}
    if with_requests:
        data["requests"] = [{f: getattr(r, f) for f in RECORD_FIELDS} for r in result.records]
    return _jsonable(data)


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def summary_row(result: BenchResult, extra: dict | None = None) -> dict:
    row = dict(extra or {})
    row.update({k: v for k, v in result.summary.items() if k != "failures"})
    row.update({f"server_{k}": v for k, v in (result.server or {}).items()})
    return _jsonable(row)


def write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
