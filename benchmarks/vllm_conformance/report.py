"""The conformance table: one row per vLLM test, pass / fail / n/a, and why for each fail and n/a.

A test that never talked to a kvtool server tests vLLM's own code: n/a. A test vLLM's file skips
here is n/a with vLLM's reason. A test that failed against kvtool takes its verdict from verdicts.py
(an API gap, or n/a because it expects another model's text or needs vLLM internals); one that no
verdict covers is shown as an unclassified failure with its error. A test that passes, passes.
"""

import json
import re
from collections import Counter
from pathlib import Path

from verdicts import GAPS, VERDICTS

MAX_REASON = 240  # characters of a failure reason in the summary (an unclassified one carries its error)
INTERNALS = "n/a (vLLM internals): never talks to a server; a unit test of vLLM's own code"
OTHER_TOOL_FORMAT = (
    "n/a (another model's tool-call format): run.py runs tests/tool_use in its hermes configuration only, "
    "the format of kvtool's model"
)


def records(results: Path) -> list[dict]:
    if not results.exists():
        return []
    return [json.loads(line) for line in results.read_text().splitlines() if line.strip()]


def note_timeout(results: Path, test_file: str, seconds: int) -> None:
    note_unfinished(results, test_file, f"harness: the file ran past {seconds} s and was stopped", seconds)


def note_not_run(results: Path, nodeid: str, why: str) -> None:
    note_unfinished(results, nodeid, f"harness: not run: {why}", 0)


def note_unfinished(results: Path, nodeid: str, message: str, seconds: int) -> None:
    """A test (or a file) the run stopped or left out, recorded as a failure for VERDICTS to judge."""
    record = {"nodeid": nodeid, "outcome": "failed", "phase": "run", "message": message, "seconds": seconds}
    with results.open("a") as out:
        out.write(json.dumps(record | {"servers": [], "wants_server": True}) + "\n")


def matches(pattern: str, nodeid: str) -> bool:
    """`*` is the only wildcard (test ids carry brackets), and a pattern may stop at any `::`."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex + "(::.*|\\[.*)?", nodeid) is not None


def verdict(record: dict) -> tuple[str, str]:
    """(result, reason) for one test; VERDICTS speak for failures only (a fixed gap then passes)."""
    if record["outcome"] == "skipped" and record["message"].startswith("Skipped: Skipping config"):
        return "n/a", OTHER_TOOL_FORMAT
    if record["outcome"] == "skipped":
        return "n/a", f"n/a (skipped by vLLM's test): {record['message']}"
    talked = record["servers"] or (record["wants_server"] and record["outcome"] == "failed")
    if not talked and record["phase"] != "collect":
        return "n/a", INTERNALS
    if record["outcome"] == "passed":
        return "pass", ""
    for pattern, result, reason in VERDICTS:
        if matches(pattern, record["nodeid"]):
            return result, f"{reason}: {GAPS[reason]}" if reason in GAPS else reason
    return "fail", f"unclassified: {record['message']}"


def summary(results: Path) -> str:
    counts = Counter(verdict(r)[0] for r in records(results))
    return ", ".join(f"{counts[k]} {k}" for k in ("pass", "fail", "n/a")) or "no results"


def missing_flags(rows: list[dict]) -> list[str]:
    return sorted({flag.split()[0] for r in rows for s in r["servers"] for flag in s["missing"]})


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(result_files: list[Path]) -> str:
    latest = {r["nodeid"]: r for f in result_files for r in records(f)}
    rows = sorted(latest.values(), key=lambda r: r["nodeid"])
    judged = [(r, *verdict(r)) for r in rows]
    counts = Counter(result for _, result, _ in judged)
    lines = [
        "# vLLM 0.33.0 conformance of `kvtool serve`",
        "",
        f"{len(rows)} tests: {counts['pass']} pass, {counts['fail']} fail, {counts['n/a']} n/a.",
        "",
        "vLLM flags the tests pass that kvtool lacks: " + (", ".join(f"`{f}`" for f in missing_flags(rows)) or "none"),
        "",
        *by_file(judged),
        "",
        *by_reason(judged),
        "",
        "| test | result | reason |",
        "|---|---|---|",
    ]
    lines += [f"| `{cell(r['nodeid'])}` | {result} | {cell(reason)} |" for r, result, reason in judged]
    return "\n".join(lines) + "\n"


def by_file(judged: list[tuple[dict, str, str]]) -> list[str]:
    """Pass / fail / n/a counts per test file."""
    counts: dict[str, Counter] = {}
    for record, result, _ in judged:
        counts.setdefault(record["nodeid"].split("::")[0], Counter())[result] += 1
    lines = ["| test file | pass | fail | n/a |", "|---|---:|---:|---:|"]
    return lines + [f"| `{name}` | {c['pass']} | {c['fail']} | {c['n/a']} |" for name, c in sorted(counts.items())]


def by_reason(judged: list[tuple[dict, str, str]]) -> list[str]:
    """Each failure's reason, and each kind of n/a, with how many tests it covers."""
    fails = Counter(reason for _, result, reason in judged if result == "fail")
    kinds = Counter(_kind(reason) for _, result, reason in judged if result == "n/a")
    lines = ["| result | why | tests |", "|---|---|---:|"]
    lines += [f"| fail | {cell(reason[:MAX_REASON])} | {n} |" for reason, n in fails.most_common()]
    return lines + [f"| n/a | {cell(kind)} | {n} |" for kind, n in kinds.most_common()]


def _kind(reason: str) -> str:
    """The kind an n/a reason names: its parenthesis (vLLM internals, another model's text, ...)."""
    match = re.match(r"n/a \(([^)]*)\)", reason)
    return match.group(1) if match else reason
