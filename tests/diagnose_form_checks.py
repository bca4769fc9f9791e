"""The checks test_unseen_forms.py, test_retold_forms.py and test_metric_forms.py share: a report told in a form
gets its cause and numbers, a look-alike gets no memory or length cause, and each kind is written in three forms or
more. (The older forms files keep their own checks.)"""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

NUMBERS_REL = 2e-3  # a number read from a rounded figure ("1.98 GiB") still names the same quantity


def check_cause_and_numbers(name: str, case: tuple[str, dict, str]) -> None:
    category, numbers, text = case
    findings = diagnose_text(text).findings
    assert [f.category for f in findings][:1] == [category], name
    assert {key: findings[0].numbers.get(key) for key in numbers} == pytest.approx(numbers, rel=NUMBERS_REL)


def check_no_memory_or_length_cause(name: str, text: str) -> None:
    found = {f.category for f in diagnose_text(text).findings}
    assert not found & MEMORY_AND_LENGTH_CATEGORIES, name


def written_in_three_forms(cases: dict, kinds: tuple[str, ...]) -> bool:
    return all(sum(name.startswith(kind + "-") for name in cases) >= 3 for kind in kinds)
