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


def test_the_most_clients_within_a_target():
    tried = []

    def meets(load: Load) -> bool:
        tried.append(load.max_concurrency)
        return load.max_concurrency <= 37

    assert largest_concurrency(meets, Load(100), 1024) == 37
    assert len(tried) < 15  # doubling, then bisection
    assert largest_concurrency(lambda load: False, Load(100), 1024) == 0
    assert largest_concurrency(lambda load: True, Load(100), 256) == 256


def test_the_highest_poisson_rate_within_a_target():
    rate = largest_rate(lambda load: load.request_rate <= 4.2 and load.max_concurrency is None, Load(100), 10.0)
    assert 4.2 / 1.02 <= rate <= 4.2
    assert largest_rate(lambda load: True, Load(100), 10.0) == 10.0
    assert largest_rate(lambda load: False, Load(100), 10.0) == 0.0
    assert largest_rate(lambda load: True, Load(100, math.inf, 4), 0.0) == 0.0
