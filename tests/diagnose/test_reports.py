"""The real reports of reports/reports.jsonl, and the written examples of reports/written.jsonl (the forms users
paste, not real reports): each gets its cause as the first finding (or, where the report itself is ambiguous, among
that finding's alternatives) with its numbers, and the reports whose cause is neither memory nor length get no memory
or length finding."""

import json
from pathlib import Path

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES

REPORTS = [
    json.loads(line)
    for name in ("reports.jsonl", "written.jsonl")
    for line in (Path(__file__).parent / "reports" / name).open()
]
# a report's name for a number -> (kvtool's names for it, the factor from the report's unit to kvtool's)
NAMES = {
    "alloc_mib": (("tried_to_allocate_gib",), 1 / 1024),
    "free_mib": (("free_gib",), 1 / 1024),
    "reserved_unallocated_mib": (("reserved_unallocated_gib",), 1 / 1024),
    "gpu_total_gib": (("total_gib", "total_gpu_gib"), 1),
    "in_use_gib": (("this_process_gib",), 1),
    "torch_alloc_gib": (("allocated_gib",), 1),
    "kv_tokens": (("kv_cache_tokens",), 1),
    "shortfall_tokens": (("kv_shortfall_tokens",), 1),
    "shortfall_gib": (("kv_shortfall_gib", "shortfall_gib"), 1),
    "max_feasible_utilization": (("max_gpu_memory_utilization",), 1),
    "total_num_cumulative_preemption": (("num_preemptions",), 1),
    "running_reqs": (("num_running",), 1),
    "pending_reqs": (("num_waiting",), 1),
    "gpu_kv_cache_usage_pct": (("kv_cache_usage_percent",), 1),
    "prefix_cache_hit_rate_pct": (("prefix_cache_hit_rate_percent",), 1),
    # the output a request asked for (a refused request), or the output an answer got (a cut answer)
    "completion_tokens": (("completion_tokens", "max_tokens"), 1),
    "max_allowed_completion_tokens": (("largest_max_tokens",), 1),
    "max_tokens_reported": (("max_tokens",), 1),
    "max_seq_len": (("max_model_len",), 1),
    "gpu_blocks": (("num_gpu_blocks",), 1),
    "kv_cache_gib": (("kv_available_gib",), 1),
    "weights_gb": (("weights_gib",), 1),  # vLLM's "GB" in "Loading model weights took" is GiB
    "alloc_gib": (("tried_to_allocate_gib",), 1),
    "free_kib": (("free_gib",), 1 / (1 << 20)),
    "other_process_mib": (("other_process_gib",), 1 / 1024),
    "released_gib": (("released_during_profiling_gib",), 1),
    "prompt_chars": (("prompt_characters",), 1),
    "swapped_reqs": (("num_swapped",), 1),
    "cpu_kv_cache_usage_pct": (("cpu_kv_cache_usage_percent",), 1),
    "budget_gib": (("budget_gib",), 1),
    "min_utilization_for_zero_kv": (("gpu_memory_utilization_for_no_kv",), 1),
    "total_gpu_gib": (("total_gpu_gib", "total_gib"), 1),
    "max_completion_tokens_sent": (("max_tokens_sent",), 1),
    "max_tokens_requested": (("max_tokens_sent",), 1),
    "max_tokens_set": (("max_tokens_set",), 1),
    "requested_max_model_len": (("launch_max_model_len",), 1),
    "reported_context_len": (("reported_max_model_len",), 1),
    "num_preemptions_interval": (("num_preemptions",), 1),  # 0.33's "Preemptions: N" counts the last interval
    "mm_image_tokens": (("mm_image_tokens",), 1),
}
# numbers that may come from the launch command or the surrounding lines: the log's context (None: not read)
FROM_CONTEXT = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "tensor_parallel_size": "tensor_parallel_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "priority": None,
}
# utilization kvtool rounds down to two decimals (what is safe to pass), the report does not
ROUNDED_DOWN = {"max_feasible_utilization"}
# reports whose text allows two causes (the thread names the second): the report's is the first finding's or among
# its alternatives
AMBIGUOUS = {r["id"] for r in REPORTS if r["context_not_in_log"].get("alternative_category")}


# What kvtool does not read yet, each with why; strict: a miss that is fixed fails until it is taken off the list
CAUSE_MISSES = {
    "r-148": "the text is a launch at 0.2 and 'No available memory'; the first instance on the GPU is only in the "
    "thread (r-174, whose text shows both launches, is no_cache_blocks)",
    "r-187": "only the log prefix (serving_chat.py) says it was serving, and prefixes are stripped before reading",
    "r-202": "the only sign is three answers cut mid-sentence at a similar length; the complaint is in the title",
}
NUMBER_MISSES = {
    "r-124": "kv_tokens_at_100000 is the earlier run's KV cache size, at another max_model_len",
    "r-167": "cpu_blocks (the CPU swap space) is no number a fix is sized on",
    "r-174": "the other instance's utilization and a memory line cut before its end",
    "r-176": "another engine's weights (the co-located stage)",
    "r-192": "progress-bar counts",
    "r-194": "LMCache's token counts of a resumed request",
    "r-202": "see CAUSE_MISSES",
    "h-025": "the other compose service's utilization (its own launch line), no number of this failure",
    "h-057": "the step budget the reporter asks about: with chunked prefill on it limits nothing, so it is not shown",
    "h-088": "cpu_blocks (the CPU swap space) is no number a fix is sized on",
}


def _cases(reports: list[dict], misses: dict[str, str]) -> list:
    return [
        pytest.param(r, id=r["id"][:60], marks=[pytest.mark.xfail(reason=reason, strict=True)] if reason else [])
        for r in reports
        for reason in [misses.get("-".join(r["id"].split("-")[:2]))]
    ]


def first_finding(report: dict):
    diagnosis = diagnose_text(report["log"])
    return diagnosis, [f for f in diagnosis.findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


@pytest.mark.parametrize("report", _cases(REPORTS, CAUSE_MISSES))
def test_a_real_report_gets_its_cause(report):
    diagnosis, found = first_finding(report)
    if report["category"] == "other":
        assert not found, [f.category for f in found]
        return
    assert found, "no memory or length cause found"
    causes = [found[0].category] + ([a.category for a in found[0].alternatives] if report["id"] in AMBIGUOUS else [])
    assert report["category"] in causes


@pytest.mark.parametrize(
    "report", _cases([r for r in REPORTS if r["numbers"] and r["category"] != "other"], NUMBER_MISSES)
)
def test_a_real_report_gets_its_numbers(report):
    diagnosis, found = first_finding(report)
    numbers = {name: value for finding in reversed(found) for name, value in finding.numbers.items()}
    numbers.update(found[0].numbers)  # the first finding's reading wins
    for name, value in report["numbers"].items():
        if name in FROM_CONTEXT and name not in numbers:
            if FROM_CONTEXT[name]:
                assert getattr(diagnosis.context, FROM_CONTEXT[name]) == value, name
            continue
        if name == "second_max_model_len":  # a second message in the same post
            assert value in [f.numbers.get("max_model_len") for f in found], name
            continue
        names, factor = NAMES.get(name, ((name,), 1))
        read = next((numbers[key] for key in names if key in numbers), None)
        assert read is not None, f"{name} not found in {sorted(numbers)}"
        if isinstance(value, list):  # several values the report names alike (two requests): any one of them
            assert read in value, name
            continue
        tolerance = 0.01 if name in ROUNDED_DOWN else 1e-3
        assert read == pytest.approx(value * factor, rel=2e-3, abs=tolerance), name


def test_the_v0_prompt_limit_report_names_both_limits():
    [report] = [r for r in REPORTS if r["id"].startswith("r-07")]
    _, [finding] = first_finding(report)
    assert [a.category for a in finding.alternatives] == ["batched_tokens_lt_model_len"]
    assert finding.alternatives[0].fixes[0].flag == "--max-num-batched-tokens"


def test_the_fixes_the_threads_reached_are_among_the_fixes():
    """Where a thread reached a flag, kvtool's fixes for the report include it."""
    expected = {
        "r-10": "--max-num-batched-tokens",  # the profiling batch's activation peak
        "r-41": "--enforce-eager",
        "r-37": "--max-num-batched-tokens",
        "r-18": "--gpu-memory-utilization",
        "r-29": "max_tokens",
        "r-13": "--gpu-memory-utilization",
    }
    for report in REPORTS:
        key = "-".join(report["id"].split("-")[:2])  # r-10, not r-101
        if key in expected:
            _, found = first_finding(report)
            knobs = {fix.flag or fix.param for fix in found[0].fixes}
            assert expected[key] in knobs, (key, knobs)
