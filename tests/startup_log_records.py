"""The real vLLM start-up logs of tests/plan/startup_logs/ (its README.md says where each comes from), read once
for every test area that checks them: plan's cases (plan/real_log_cases.py), its --from-log and reader tests,
and diagnose's (diagnose/test_startup_logs.py).
"""

import json
import re
from pathlib import Path

FOLDER = Path(__file__).parent / "plan" / "startup_logs"
FIRST, ADDED = "logs.jsonl", "logs_added.jsonl"  # the 15 given first (s-01 - s-30), and the 59 held out until later


def short_id(record: dict) -> str:
    """The record's id without its description: s-01-qwen2-7b-... is s-01."""
    return re.match(r"s-\d+", record["id"])[0]


def read(name: str) -> dict[str, dict]:
    """The records of one data file, by short id, in the file's order."""
    records = map(json.loads, (FOLDER / name).read_text().splitlines())
    return {short_id(record): record for record in records}


LOGS = read(FIRST) | read(ADDED)
