"""`--slo` targets and the search for the largest load that meets them."""

import math

import pytest

from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.slo import largest_concurrency, largest_rate, parse_slo
from kvtool.errors import UsageError


def test_targets_in_vllm_bench_serve_names_and_milliseconds():
    slo = parse_slo("ttft_p99=2s, tpot_mean=50ms,itl_p50=30,e2el_median=1.5s")
    assert slo.limits_ms == {"p99_ttft_ms": 2000, "mean_tpot_ms": 50, "median_itl_ms": 30, "median_e2el_ms": 1500}
    assert slo.met_by({"p99_ttft_ms": 1999, "mean_tpot_ms": 50, "median_itl_ms": 1, "median_e2el_ms": 0})
    assert not slo.met_by({"p99_ttft_ms": 2001, "mean_tpot_ms": 50, "median_itl_ms": 1, "median_e2el_ms": 0})


@pytest.mark.parametrize("text", ["ttft=2s", "ttft_p95=2s", "latency_mean=2s", "ttft_p99=fast", "ttft_p99=2h", ","])
def test_a_malformed_target_is_refused(text):
    with pytest.raises(UsageError, match="--slo"):
        parse_slo(text)


@pytest.mark.parametrize("text", ["ttft_p99=0", "ttft_p99=0.0s"])
def test_a_zero_limit_is_refused(text):
    with pytest.raises(UsageError, match="limit of 0"):
        parse_slo(text)


def test_slack_is_the_worst_metric_over_its_limit():
    slo = parse_slo("ttft_p99=2s,tpot_mean=50ms")
    assert slo.slack({"p99_ttft_ms": 1000, "mean_tpot_ms": 75}) == pytest.approx(1.5)
    assert slo.met_by({"p99_ttft_ms": 2000, "mean_tpot_ms": 10})


def clients_slack(answer: float, tried: list, power: float = 1.0):
    """A slack that grows as clients^power and passes 1 just above `answer`."""

    def slack(load: Load) -> float:
        tried.append(load.max_concurrency)
        return (load.max_concurrency / (answer + 0.5)) ** power

    return slack


@pytest.mark.parametrize(("answer", "power"), [(37, 1.0), (37, 3.0), (700, 0.3), (1, 1.0), (2, 2.0)])
def test_the_most_clients_within_a_target(answer, power):
    tried = []
    assert largest_concurrency(clients_slack(answer, tried, power), Load(100), 1024) == answer
    assert len(tried) <= 12 and len(set(tried)) == len(tried)


def test_a_slack_that_jumps_still_finds_the_edge():
    """p99 latencies step up where a queue forms: 0.2 below 37 clients, 5 from 38."""
    tried = []
    slack = lambda load: tried.append(1) or (0.2 if load.max_concurrency <= 37 else 5.0)  # noqa: E731
    assert largest_concurrency(slack, Load(100), 1024) == 37
    assert len(tried) < 20


def test_the_ends_of_the_concurrency_search():
    assert largest_concurrency(lambda load: 2.0, Load(100), 1024) == 0
    assert largest_concurrency(lambda load: 0.1, Load(100), 256) == 256


def test_the_highest_poisson_rate_within_a_target():
    tried = []

    def slack(load: Load) -> float:
        tried.append(load.request_rate)
        assert load.max_concurrency is None
        return load.request_rate / 4.2

    rate = largest_rate(slack, Load(100), 10.0)
    assert 4.2 / 1.02 <= rate <= 4.2 and len(tried) <= 10
    assert largest_rate(lambda load: 0.5, Load(100), 10.0) == 10.0
    assert largest_rate(lambda load: 5.0, Load(100), 10.0) == 0.0
    assert largest_rate(lambda load: 0.5, Load(100, math.inf, 4), 0.0) == 0.0
