import math

import pytest

from kvtool.bench.client import RequestRecord, tokens_per_chunk
from kvtool.bench.metrics import parse_percentiles, parse_slo, percentile, request_itls, request_tpot, summarize
from kvtool.errors import UsageError


def streamed(chunk_times, chunk_tokens, prompt_tokens=10, index=0):
    """A finished request whose chunks arrived at `chunk_times` (seconds from send)."""
    return RequestRecord(
        index=index,
        request_id=f"r{index}",
        max_tokens=sum(chunk_tokens),
        success=True,
        prompt_tokens=prompt_tokens,
        output_tokens=sum(chunk_tokens),
        usage_reported=True,
        ttft=chunk_times[0],
        latency=chunk_times[-1],
        chunk_times=list(chunk_times),
        chunk_tokens=list(chunk_tokens),
    )


def test_tpot_excludes_the_first_token():
    # first token after 1.0 s (prefill), then 4 more tokens 0.1 s apart
    record = streamed([1.0, 1.1, 1.2, 1.3, 1.4], [1, 1, 1, 1, 1])
    assert request_tpot(record) == pytest.approx(0.1)


def test_tpot_is_undefined_for_a_single_token():
    assert request_tpot(streamed([0.5], [1])) is None


def test_itl_is_per_token_when_a_chunk_carries_several():
    # the second chunk carries 4 tokens 0.4 s after the first: 4 gaps of 0.1 s, not one of 0.4 s
    record = streamed([1.0, 1.4, 1.5], [1, 4, 1])
    assert request_itls(record) == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.1])
    assert request_tpot(record) == pytest.approx(0.1)


def test_itl_skips_chunks_without_tokens():
    record = streamed([1.0, 1.2, 1.3], [1, 0, 2])
    assert request_itls(record) == pytest.approx([0.15, 0.15])


def test_percentile_interpolates_linearly():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile(values, 100) == 4.0


def test_summary_counts_tokens_from_usage_and_reports_failures():
    ok = [streamed([0.2, 0.3, 0.4], [1, 1, 1], index=i) for i in range(3)]
    failed = RequestRecord(index=3, request_id="r3", max_tokens=3, error="HTTP 400: too long")
    summary = summarize(ok + [failed], duration_s=2.0)
    assert summary["completed"] == 3 and summary["failed"] == 1
    assert summary["total_input_tokens"] == 30 and summary["total_output_tokens"] == 9
    assert summary["request_throughput"] == pytest.approx(1.5)
    assert summary["output_throughput"] == pytest.approx(4.5)
    assert summary["mean_ttft_ms"] == pytest.approx(200)
    assert summary["p99_tpot_ms"] == pytest.approx(100)
    assert summary["max_e2el_ms"] == pytest.approx(400)
    assert summary["failures"] == {"HTTP 400: too long": 1}


def test_goodput_counts_only_requests_within_every_slo():
    fast = streamed([0.1, 0.12, 0.14], [1, 1, 1], index=0)  # TTFT 100 ms, TPOT 20 ms
    slow_first = streamed([0.9, 0.92, 0.94], [1, 1, 1], index=1)  # TTFT 900 ms
    slow_decode = streamed([0.1, 0.3, 0.5], [1, 1, 1], index=2)  # TPOT 200 ms
    summary = summarize([fast, slow_first, slow_decode], 1.0, parse_slo("ttft=500ms,tpot=50ms"))
    assert summary["request_goodput"] == pytest.approx(1.0)
    assert summary["slo_attainment"] == pytest.approx(1 / 3)


def test_chosen_percentiles_become_keys():
    summary = summarize([streamed([0.1, 0.2], [1, 1])], 1.0, percentiles=(75, 99.9))
    assert "p75_itl_ms" in summary and "p99.9_e2el_ms" in summary and "p99_itl_ms" not in summary


def test_slo_units():
    assert parse_slo("ttft=0.5s,tpot=50ms,e2el=2000").limits_s == {"ttft": 0.5, "tpot": 0.05, "e2el": 2.0}
    with pytest.raises(UsageError, match="cannot read SLO 'latency=1s'"):
        parse_slo("latency=1s")


def test_percentiles_must_be_in_range():
    assert parse_percentiles("50,99.9") == (50.0, 99.9)
    with pytest.raises(UsageError):
        parse_percentiles("0,150")


def test_tokens_per_chunk_prefers_the_servers_running_count():
    assert tokens_per_chunk([1, 3, 4], ["a", "bc", "d"], 4) == [1, 2, 1]


def test_tokens_per_chunk_shares_the_usage_total_by_characters():
    counts = tokens_per_chunk([None, None], ["ab", "abcdef"], 8)
    assert counts == [2, 6] and sum(counts) == 8
    assert sum(tokens_per_chunk([None] * 3, ["x", "yy", "zzz"], 7)) == 7


def test_empty_run_summarises_without_error():
    summary = summarize([], 1.0)
    assert summary["completed"] == 0 and not math.isnan(summary["mean_ttft_ms"])


def test_server_peaks_come_only_from_samples_taken_while_the_server_was_busy():
    from kvtool.bench.server_view import ServerWatcher
    from kvtool.monitor.page import parse_page

    def sample(running, waiting, usage):
        return parse_page(
            f"vllm:num_requests_running {running}\nvllm:num_requests_waiting {waiting}\n"
            f"vllm:kv_cache_usage_perc {usage}\n"
        )

    watcher = ServerWatcher(client=None, base_url="http://127.0.0.1:1")
    watcher._record_peaks(sample(0, 0, 0.0))
    assert watcher.peaks == {}  # idle: a run too short to observe has no peak
    for running, waiting, usage in ((2, 0, 0.25), (1, 3, 0.5), (0, 0, 0.0)):
        watcher._record_peaks(sample(running, waiting, usage))
    assert watcher.peaks == {"kv_cache_usage": 0.5, "num_requests_waiting": 3, "num_requests_running": 2}
