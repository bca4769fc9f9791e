import json
import math
import time

import pytest

from kvtool.bench.client import RequestRecord, _ChunkStream, error_message
from kvtool.bench.datasets import FileDataset, RandomDataset, load_dataset
from kvtool.bench.runner import BenchConfig
from kvtool.bench.schedule import arrival_times
from kvtool.bench.sweep import parse_sweep
from kvtool.errors import UsageError


def test_random_dataset_is_repeatable_and_shares_the_prefix():
    dataset = RandomDataset(input_len=20, output_len=8, range_ratio=0.5, prefix_len=6, seed=3)
    first, again = dataset.sample(5), dataset.sample(5)
    assert first == again
    prefixes = {" ".join(s.prompt.split()[:6]) for s in first}
    assert len(prefixes) == 1
    assert all(6 + 10 <= s.input_len <= 6 + 30 and 4 <= s.max_tokens <= 12 for s in first)
    assert all(len(s.prompt.split()) == s.input_len for s in first)
    assert RandomDataset(seed=4).sample(2) != RandomDataset(seed=3).sample(2)


def test_sharegpt_file_uses_the_first_turn(tmp_path):
    path = tmp_path / "conv.json"
    conversations = [
        {"conversations": [{"from": "human", "value": "Why is the sky blue?"}, {"from": "gpt", "value": "x" * 80}]},
        {"conversations": [{"from": "human", "value": "alone"}]},
    ]
    path.write_text(json.dumps(conversations))
    samples = FileDataset(path).sample(3)
    assert [s.prompt for s in samples] == ["Why is the sky blue?"] * 3
    assert samples[0].max_tokens == 20


def test_jsonl_prompts_take_their_own_max_tokens(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('"plain prompt"\n{"prompt": "with length", "max_tokens": 7}\n')
    samples = load_dataset(str(path), input_len=1, output_len=32, range_ratio=0, prefix_len=0, seed=0).sample(2)
    assert sorted((s.prompt, s.max_tokens) for s in samples) == [("plain prompt", 32), ("with length", 7)]


def test_bad_dataset_files_name_the_problem(tmp_path):
    with pytest.raises(UsageError, match="dataset file not found"):
        FileDataset(tmp_path / "missing.json").sample(1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(UsageError, match="cannot read"):
        FileDataset(broken).sample(1)


def test_arrivals_all_at_once_for_infinite_rate():
    assert arrival_times(4, math.inf) == [0.0] * 4


def test_poisson_arrivals_have_the_asked_mean_rate():
    times = arrival_times(4000, request_rate=8.0, seed=1)
    assert times == arrival_times(4000, request_rate=8.0, seed=1)
    assert len(times) / times[-1] == pytest.approx(8.0, rel=0.05)


def test_burstiness_changes_the_spread_not_the_rate():
    even = arrival_times(4000, 8.0, burstiness=8.0, seed=1)
    bursty = arrival_times(4000, 8.0, burstiness=0.25, seed=1)
    gaps = lambda ts: [b - a for a, b in zip(ts, ts[1:])]
    spread = lambda gs: max(gs) / (sum(gs) / len(gs))
    assert len(bursty) / bursty[-1] == pytest.approx(8.0, rel=0.15)
    assert spread(gaps(bursty)) > 3 * spread(gaps(even))


def test_sweep_gives_one_config_per_value_with_fresh_prompts():
    sweep = parse_sweep("max-concurrency=1,8,32")
    configs = sweep.configs(BenchConfig())
    assert [c.max_concurrency for c in configs] == [1, 8, 32]
    assert [c.dataset.seed for c in configs] == [0, 1, 2]
    assert parse_sweep("request-rate=1,4,inf").values == (1.0, 4.0, math.inf)


@pytest.mark.parametrize("text", ["batch-size=1,2", "max-tokens=", "max-tokens=a,b", "max-concurrency=0,4"])
def test_bad_sweeps_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_sweep(text)


def test_sse_stream_records_chunks_and_usage():
    stream = _ChunkStream(start=0.0)
    lines = [
        'data: {"choices": [{"index": 0, "text": "Hel", "finish_reason": null}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}',
        "",
        ": keep-alive comment",
        'data: {"choices": [{"index": 0, "text": "lo world", "finish_reason": "length"}], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}',
        'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}',
        "data: [DONE]",
    ]
    ended = [stream.feed(line) for line in lines]
    record = stream.finish(RequestRecord(0, "r0", 3))
    assert ended[-1] and not any(ended[:-1])
    assert record.success and record.generated_text == "Hello world"
    assert (record.prompt_tokens, record.output_tokens, record.chunk_tokens) == (5, 3, [1, 2])
    assert record.finish_reason == "length"


def test_error_bodies_of_both_vllm_shapes():
    nested = b'{"error": {"message": "too long", "type": "BadRequestError", "code": 400}}'
    flat = b'{"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}'
    assert error_message(nested) == error_message(flat) == "too long"
    assert error_message(b"<html>bad gateway</html>") == "<html>bad gateway</html>"


def test_sse_error_event_and_unreadable_chunk_fail_the_request():
    stream = _ChunkStream(start=0.0)
    assert stream.feed('data: {"error": {"message": "engine died", "code": 500}}')
    assert stream.finish(RequestRecord(0, "r0", 3)).error == "engine died"
    garbled = _ChunkStream(start=0.0)
    assert garbled.feed("data: {oops")
    record = garbled.finish(RequestRecord(1, "r1", 3))
    assert not record.success and record.error.startswith("unreadable stream chunk")


def test_live_throughput_counts_only_the_recent_window():
    from kvtool.bench.report import live_line
    from kvtool.bench.runner import RunProgress

    progress = RunProgress(total=10, done=3, failed=1, in_flight=2)
    now = time.perf_counter()
    progress.started_at = now - 20
    progress.recent_tokens.append((now - 10, 1000))  # outside the 5 s window
    progress.add_tokens(10)
    assert progress.output_throughput() == pytest.approx(2.0, rel=0.01)
    assert str(live_line(progress, "max-concurrency=8")).startswith(
        "max-concurrency=8  done 3/10  in flight 2  failed 1"
    )
