"""Every example log in corpus/ gives exactly the findings its sidecar .json names, in order, with
those numbers (and, where listed, those fixes)."""

import json
from pathlib import Path

import pytest

from kvtool.engine.diagnosis import diagnose

CORPUS = Path(__file__).parent / "corpus"
LOGS = sorted(CORPUS.glob("*.log"))


def test_corpus_is_there():
    assert len(LOGS) >= 50
    assert all(log.with_suffix(".json").is_file() for log in LOGS)


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_log_gives_expected_findings(log: Path):
    expected = json.loads(log.with_suffix(".json").read_text())["findings"]
    with open(log, "rb") as stream:
        found = [finding.to_dict() for finding in diagnose(stream).findings]
    assert [f["category"] for f in found] == [e["category"] for e in expected]
    for want, got in zip(expected, found):
        assert got["stage"] == want["stage"]
        for name, value in want["numbers"].items():
            assert got["numbers"].get(name) == pytest.approx(value), f"{want['category']}: {name}"
        evidence = got["evidence"]
        assert evidence and "\x1b" not in evidence and "\r" not in evidence and "pid=" not in evidence[:40]
        assert got["fixes"], "every finding says what to change"
        for fix in want.get("fixes", []):
            assert any(fix.items() <= found.items() for found in got["fixes"]), fix
