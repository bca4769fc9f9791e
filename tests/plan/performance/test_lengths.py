"""--lengths: how a load's prompt and output lengths spread about IN:OUT, and what a spread changes in a run."""

import math
import statistics

import pytest

from kvtool.engine.plan.performance.lengths import Lengths, parse_lengths
from kvtool.errors import UsageError

MAX_MODEL_LEN = 4096


def test_fixed_lengths_are_the_workload_itself():
    assert set(Lengths().draw(1024, 256, 50, MAX_MODEL_LEN, 0)) == {(1024, 256)}


def test_exponential_lengths_keep_the_means_and_a_long_tail_within_max_model_len():
    pairs = Lengths("exponential").draw(220, 200, 4000, MAX_MODEL_LEN, 0)
    prompts, outputs = [p for p, _ in pairs], [o for _, o in pairs]
    assert statistics.mean(prompts) == pytest.approx(220, rel=0.05)
    assert statistics.mean(outputs) == pytest.approx(200, rel=0.05)
    assert max(outputs) > 5 * 200  # the tail a chat dataset's long answers make
    assert min(p for p in prompts) >= 1 and min(outputs) >= 1
    assert max(p + o for p, o in pairs) <= MAX_MODEL_LEN


def test_uniform_lengths_stay_within_the_range_ratio():
    pairs = Lengths("uniform", 0.5).draw(1000, 100, 500, MAX_MODEL_LEN, 0)
    assert all(500 <= p <= 1500 and 50 <= o <= 150 for p, o in pairs)
    assert len(set(pairs)) > 100


def test_a_runs_listed_lengths_are_replayed_in_order():
    listed = ((10, 5), (300, 40))
    assert Lengths(listed=listed).draw(1, 1, 5, MAX_MODEL_LEN, 0) == [*listed, *listed, (10, 5)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("fixed", Lengths()), ("Exponential", Lengths("exponential")), ("uniform:0.25", Lengths("uniform", 0.25))],
)
def test_parse_lengths(text, expected):
    assert parse_lengths(text) == expected


@pytest.mark.parametrize("text", ["normal", "uniform:1", "uniform:x", "exponential:0.5", "uniform:-0.1"])
def test_a_malformed_spread_is_refused(text):
    with pytest.raises(UsageError, match="--lengths"):
        parse_lengths(text)


def test_a_spread_of_the_same_means_stretches_a_saturated_run():
    """Long answers keep few requests decoding at the end of a run: the same means take longer spread out."""
    from kvtool.cli.plan_forecast import planned_setup
    from kvtool.engine.plan.performance.load import Load
    from kvtool.engine.plan.performance.predict import predict
    from kvtool.engine.sizing.engine_args import EngineArgs

    setup = planned_setup(EngineArgs(model="qwen3-8b"), "H100-80GB", "0.12.0")
    fixed = predict(setup, 220, 200, Load(300, math.inf)).metrics
    spread = predict(setup, 220, 200, Load(300, math.inf, lengths=Lengths("exponential"))).metrics
    assert spread["duration"] > 1.2 * fixed["duration"]
    assert spread["p99_e2el_ms"] > 1.5 * fixed["p99_e2el_ms"]
