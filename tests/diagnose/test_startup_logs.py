"""The 74 real start-up logs (tests/startup_log_records.py, which plan's tests read too) through diagnose: what
it reads from them is what vLLM printed (its tightest rank where every rank prints its own), a log that started
gives no finding, a failed one gets the cause vLLM printed, and a start-up that ran out of KV cache gets fixes
whose numbers are vLLM's and would start."""

import json
from pathlib import Path

import pytest
from startup_log_records import FOLDER, LOGS

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.measured import graphs_set_aside
from kvtool.engine.diagnosis.memory_model import MemoryModel, resolve_spec
from kvtool.engine.diagnosis.startup import with_failure

# the log's record -> diagnose's context
PRINTED = {
    "reported_kv_tokens": "kv_cache_tokens",
    "reported_gpu_blocks": "num_gpu_blocks",
    "reported_available_kv_gib": "available_kv_gib",
    "reported_weights_gib": "weights_gib",
    "reported_max_concurrency": "max_concurrency",
}
KV, NO_BLOCKS = "kv_cache_too_small_at_startup", "no_cache_blocks"
# The start-up failure each paste shows, by vLLM's error line; every other log started and shows none.
CAUSES = {
    **dict.fromkeys(("s-25", "s-28", "s-112", "s-113", "s-114", "s-115", "s-118", "s-119", "s-120"), KV),
    **dict.fromkeys(("s-121", "s-150", "s-158"), KV),
    "s-107": KV,  # the paste holds the run at 0.80 that failed before the one at 0.85 started
    "s-111": NO_BLOCKS,  # "Available KV cache memory: -2.14 GiB", then "EngineCore failed to start"
    "s-139": "cuda_oom_startup",  # out of memory warming the sampler up with 1024 dummy requests
    "s-156": NO_BLOCKS,
    "s-157": NO_BLOCKS,  # in the title
}
# Failed runs whose excerpt stops before vLLM's error: diagnose has nothing to go on, and says nothing.
NO_ERROR_LINE = {
    "s-110": "the excerpt ends at V0's budget lines (0.04 - 0.13 GiB of KV cache per rank)",
    "s-116": "the excerpt ends at 'Error execut', after V0's '# GPU blocks: 507'",
}
# Records whose figures are the reporter's summary, not lines vLLM printed.
SUMMARISED = {
    "s-107": "the 0.85 run's KV cache, tokens and concurrency are the reporter's summary",
    "s-108": "the KV cache, tokens and concurrency are the recipe author's prose",
}
# What diagnose misses on these logs, and why: each must keep missing until it is fixed, then leave its list.
KNOWN_FIGURES = {
    "s-101": "the paste lost V0's '# ' before 'GPU blocks: 1952' (markdown), a wording the reader does not know",
}
KNOWN_CAUSES = {
    "s-117": "0.2's refusal of a max_model_len over the GPU's shared memory ('vLLM cannot currently support "
    "max_model_len=65536 with block_size=16 ...') has no category: diagnose infers a KV cache too small instead",
}


# gpt-oss's sliding-window layers take a fixed share of each request: fp8 holds more than twice the tokens there
# (twice the estimate and that share), beyond the bound assert_would_start holds a full-attention model to.
SLIDING_WINDOW = {"s-121"}


def cases(keys, known: dict[str, str]) -> list:
    """The logs of `keys` as parameters, a known miss expected to fail (strictly: a fix shows up)."""
    marks = {key: pytest.mark.xfail(reason=why, strict=True) for key, why in known.items()}
    return [pytest.param(key, marks=marks.get(key, ()), id=key) for key in keys]


def printed(value, text: str) -> bool:
    """Whether the log's text holds the record's figure as vLLM prints it (V0's tokens are blocks x 16)."""
    return value is not None and (str(value) in text or f"{value:,}" in text)


@pytest.mark.parametrize("key", cases((key for key, log in LOGS.items() if log["startup_ok"]), KNOWN_FIGURES))
def test_diagnose_reads_what_vllm_printed(key):
    log = LOGS[key]
    if key in SUMMARISED:
        pytest.skip(SUMMARISED[key])
    context = diagnose_text(log["log"]).context
    for record, name in PRINTED.items():
        if printed(log[record], log["log"]):
            assert getattr(context, name) == pytest.approx(log[record]), name
    if printed(log["max_model_len"], log["log"]):
        assert context.max_model_len == log["max_model_len"]


@pytest.mark.parametrize("key", cases(LOGS, KNOWN_CAUSES))
def test_a_started_log_is_no_failure_and_a_failed_one_gets_its_cause(key):
    findings = diagnose_text(LOGS[key]["log"]).findings
    causes = {finding.category for finding in findings if finding.stage == "startup"}
    assert causes == ({CAUSES[key]} if key in CAUSES else set())
    if LOGS[key]["startup_ok"] and key not in CAUSES:
        assert findings == []


def test_every_failed_log_says_how_it_failed():
    failed = {key for key, log in LOGS.items() if not log["startup_ok"]}
    assert failed <= CAUSES.keys() | NO_ERROR_LINE.keys() | KNOWN_CAUSES.keys()
    assert not (CAUSES.keys() & NO_ERROR_LINE.keys())


def test_of_ranks_that_printed_different_kv_caches_the_smallest_is_read():
    """vLLM 0.10.0 with TP 8: each rank prints its own budget (35.65 to 36.12 GiB), the engine keeps the least."""
    context = diagnose_text(LOGS["s-11"]["log"]).context
    assert context.kv_cache_tokens == 99421 * 16 == 1_590_736  # the final num_gpu_blocks the engine printed
    assert (
        context.available_kv_gib == 35.65 and context.startup.rank_figures["available_kv_cache_memory_gib"][4] == 36.12
    )


def log_text(key: str) -> str:
    return LOGS[key]["log"]


def config(key: str):
    return resolve_spec(str(FOLDER / LOGS[key]["config"]["path"]))


REPORTS = [json.loads(line) for line in (Path(__file__).parent / "reports" / "reports.jsonl").open()]
TOO_SMALL = [LOGS[key]["log"] for key, cause in CAUSES.items() if cause == KV and key not in SLIDING_WINDOW] + [
    report["log"] for report in REPORTS if report["category"] == "kv_cache_too_small_at_startup"
]


def assert_would_start(finding) -> None:
    """Each fix with a value starts by vLLM's own numbers: a length within its estimate, a utilization whose share
    covers the shortfall, fp8 holding the factor times the estimate at most (the same bytes, half a token each)."""
    n = finding.numbers
    for fix in finding.fixes:
        if fix.flag == "--max-model-len":
            assert fix.value <= n["estimated_max_model_len"]
        if fix.flag == "--gpu-memory-utilization" and fix.value is not None:
            assert (fix.value - n["gpu_memory_utilization"]) * n["total_gpu_gib"] >= n["kv_shortfall_gib"]
        if fix.flag == "--kv-cache-dtype":
            assert n["fp8_estimated_max_model_len"] <= n["estimated_max_model_len"] * n["fp8_kv_token_factor"]
            assert n["fp8_estimated_max_model_len"] <= n.get("max_model_len", n["fp8_estimated_max_model_len"])


@pytest.mark.parametrize("text", TOO_SMALL, ids=range(len(TOO_SMALL)))
def test_a_failed_start_ups_fixes_are_vllms_numbers_and_would_start(text):
    [finding] = [f for f in diagnose_text(text).findings if f.category == "kv_cache_too_small_at_startup"]
    assert_would_start(finding)
    read = ("max_model_len", "kv_available_gib", "kv_needed_gib", "kv_cache_tokens")
    assert {finding.sources[name] for name in read if name in finding.numbers} == {"measured"}


def test_vllms_own_estimate_is_the_length_that_fits():
    for prefix, estimate in (("s-25", 34736), ("s-28", 810_208)):
        [finding] = diagnose_text(log_text(prefix)).findings
        assert (
            finding.numbers["estimated_max_model_len"] == estimate
            and finding.sources["estimated_max_model_len"] == "measured"
        )
        assert finding.fixes[0].value == estimate // 1024 * 1024


def test_a_pipeline_split_kvtool_cannot_see_falls_back_on_vllms_estimate():
    """s-25 splits 48 layers 16 / 32 over a 16 GB and a 32 GB card: kvtool's even split would hold twice vLLM's
    estimate, so the fp8 length is vLLM's estimate doubled, marked estimated."""
    [finding] = diagnose_text(log_text("s-25"), spec=config("s-25")).findings
    assert finding.numbers["fp8_estimated_max_model_len"] == 2 * 34736
    assert finding.sources["fp8_estimated_max_model_len"] == "estimated"
    assert "tp2_estimated_max_model_len" not in finding.numbers


def test_with_the_gpu_given_the_utilization_that_fits_covers_the_shortfall():
    text = (Path(__file__).parent / "corpus" / "kv_v033_full_startup_log.log").read_text()
    text = text.replace("'max_model_len': 131072}", "'max_model_len': 131072, 'gpu_memory_utilization': 0.8}")
    [finding] = diagnose_text(text, total_gpu_gib=79.19).findings
    assert finding.sources["total_gpu_gib"] == "given" and finding.sources["gpu_memory_utilization"] == "measured"
    assert finding.numbers["gpu_memory_utilization_needed"] == 0.89  # 0.8 x 79.19 + 6.37 GiB = 0.8804 of it
    assert finding.sources["gpu_memory_utilization_needed"] == "derived"
    assert_would_start(finding)


def test_preemption_on_a_multi_rank_log_caps_concurrency_at_what_vllm_printed():
    stats = (
        "INFO 08-01 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 900.0 tokens/s, Running: 60 reqs, Waiting: 40 reqs, GPU KV cache usage: 97.5%, Prefix cache "
        "hit rate: 2.0%\n"
    )
    [finding] = diagnose_text(log_text("s-11") + "\n" + stats).findings
    assert finding.category == "preemption"
    assert finding.numbers["kv_cache_tokens"] == 1_590_736 and finding.sources["kv_cache_tokens"] == "measured"
    assert finding.numbers["max_num_seqs_without_preemption"] == 48  # vLLM: "Maximum concurrency ...: 48.55x"


def test_a_request_too_long_for_a_logged_run_is_checked_against_its_measured_kv_cache():
    error = (
        "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum context "
        "length is 16384 tokens. However, you requested 30000 tokens (29000 in the messages, 1000 in the "
        "completion). Please reduce the length of the messages or completion.\", 'type': 'BadRequestError'}\n"
    )
    [finding] = diagnose_text(log_text("s-01") + "\n" + error, spec=config("s-01")).findings
    n, sources = finding.numbers, finding.sources
    assert (n["kv_available_gib"], sources["kv_available_gib"]) == (5.01, "measured")
    assert n["needed_max_model_len"] == 30720 and n["kv_max_model_len"] == 30720  # the 5.01 GiB hold it
    assert sources["kv_max_model_len"] == "derived"
    # the same arithmetic holds the 93,872 tokens vLLM printed for this 5.01 GiB
    cache = MemoryModel.from_context(diagnose_text(log_text("s-01")).context, config("s-01"))
    assert cache.max_len_for(5.01, limit=200_000) == pytest.approx(93_872, rel=0.005)


def test_graphs_the_release_only_advised_about_are_not_counted_as_kv_memory():
    """0.19.1 prints the graph estimate as advice ("will be enabled by default in v0.21"): --enforce-eager gives
    that run's KV cache nothing; 0.21 sets it aside, so it does."""
    assert not graphs_set_aside(diagnose_text(log_text("s-20")).context)
    text = (Path(__file__).parent / "corpus" / "kv_v033_full_startup_log.log").read_text()
    graphs = "INFO 11-20 16:00:20 [gpu_model_runner.py:6043] Estimated CUDA graph memory: 0.5 GiB total\n"
    [finding] = diagnose_text(graphs + text).findings
    eager = next(fix for fix in finding.fixes if fix.flag == "--enforce-eager")
    n = finding.numbers
    assert n["enforce_eager_max_model_len"] > n["estimated_max_model_len"]
    assert f"max_model_len {n['enforce_eager_max_model_len']} fits" in eager.action


def test_the_readers_failure_completes_the_recognisers_only_where_they_agree():
    log = diagnose_text(log_text("s-28")).context.startup
    cut = {"max_model_len": 1048576, "kv_available_gib": 17.39}  # a recogniser that read less of the message
    assert with_failure(cut, "kv_cache_too_small_at_startup", log)["estimated_max_model_len"] == 810_208
    other = {"max_model_len": 524288}  # another failure in the same paste
    assert with_failure(other, "kv_cache_too_small_at_startup", log) == other
    assert with_failure(cut, "no_cache_blocks", log) == cut
