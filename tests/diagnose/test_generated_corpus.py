"""Every wording of every release, pasted every way people paste it: the right category and every
number the message prints, in all cases (one test, so thousands of cases stay fast)."""

import importlib.util
from pathlib import Path

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.wordings import STATS_LINE

_spec = importlib.util.spec_from_file_location("rendered", Path(__file__).with_name("rendered.py"))
rendered = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rendered)
VARIANTS, CASES = rendered.VARIANTS, rendered.cases()


def expected_categories(wording) -> tuple[str, ...]:
    """A stats line with requests waiting behind a full cache is preemption."""
    return (wording.category, "preemption") if wording.detail == STATS_LINE else (wording.category,)


def read_back(case) -> str | None:
    """None when diagnose names the category with every number of the message, else what went wrong."""
    findings = [f for f in diagnose_text(case.text).findings if f.category in expected_categories(case.wording)]
    if not findings:
        return f"not recognised: {[f.category for f in diagnose_text(case.text).findings]}"
    for name, value in case.numbers.items():
        if findings[0].numbers.get(name) != pytest.approx(value, rel=1e-3):
            return f"{name}: read {findings[0].numbers.get(name)}, printed {value}"
    return None


def test_the_generated_corpus_is_large_and_covers_every_wording_and_variant():
    assert len(CASES) >= 500
    assert {case.variant for case in CASES} == set(VARIANTS)
    assert {case.wording.template for case in CASES} == {wording.template for wording in rendered.WORDINGS}


def test_every_generated_case_is_diagnosed_with_its_numbers():
    failures = [(case.id, problem, case.text) for case in CASES if (problem := read_back(case))]
    assert not failures, f"{len(failures)} of {len(CASES)} failed, first: {failures[:3]}"
