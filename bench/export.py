"""Results as files: JSON (config, summary, server view, per-request records) and CSV (one row per run)."""

import csv
import dataclasses
import json
import math
from pathlib import Path

from kvtool.bench.runner import BenchResult
from kvtool.bench.sweep import Sweep

# Per-request fields kept in JSON; the metric inputs (chunk times and token counts) are all there.
RECORD_FIELDS = (
    "index",
    "request_id",
    "success",
    "error",
    "send_time",
    "queue_time",
    "prompt_tokens",
    "output_tokens",
    "max_tokens",
    "finish_reason",
    "usage_reported",
    "ttft",
    "latency",
    "chunk_times",
    "chunk_tokens",
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


def runs_dict(sweep: Sweep, results: list[BenchResult]) -> dict:
    """A single run's dict, or {"sweep": NAME, "runs": [{NAME: value, ...run}, ...]}."""
    runs = [{**fields, **result_dict(r)} for fields, r in zip(sweep.point_fields(), results)]
    return {"sweep": sweep.parameter, "runs": runs} if sweep.parameter else runs[0]


def summary_rows(sweep: Sweep, results: list[BenchResult]) -> list[dict]:
    """One flat row per run: the swept value, the summary, the server view as server_* columns."""
    rows = []
    for fields, result in zip(sweep.point_fields(), results):
        row = {**fields, **{k: v for k, v in result.summary.items() if k != "failures"}}
        row.update({f"server_{k}": v for k, v in (result.server or {}).items()})
        rows.append(_jsonable(row))
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
