"""Verdicts for the tests that fail against kvtool, read from their failures.

VERDICTS: (test id pattern, result, reason), first match wins. result "fail" with a reason that is
a key of GAPS is an API gap; "n/a" says why the test does not apply to kvtool.
"""

GAPS: dict[str, str] = {}

VERDICTS: list[tuple[str, str, str]] = []
