"""vLLM's V1 scheduler as simulated: decode runs summed in closed form give what stepping one step at a time
gives, chunked prefill, the token budget, max_num_seqs, KV capacity and preemption, and the loads of
`vllm bench serve`."""

import math
import time

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.performance.hardware import catalog_figures
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.metrics import PERCENTILES, bench_metrics
from kvtool.engine.plan.performance.model_cost import model_cost
from kvtool.engine.plan.performance.predict import ServingSetup, predict
from kvtool.engine.plan.performance.scheduler import Simulation
from kvtool.engine.plan.performance.sim_request import KV, SEQS, SchedulerLimits
from kvtool.engine.plan.performance.step_time import StepModel
from kvtool.engine.sizing.engine_config import EngineConfig

SPEC = resolve_model_spec("Qwen/Qwen3-8B")
H100 = catalog_figures("H100-80GB")
KV_BYTES = 36 * 2 * 8 * 128 * 2
STEPS = StepModel(model_cost(SPEC, None, 1, KV_BYTES, H100), H100)
OVERHEAD = 0.04
CONFIG = EngineConfig.of(max_num_seqs=1024, max_num_batched_tokens=8192)
SETUP = ServingSetup(SPEC, H100, CONFIG, KV_BYTES, 30_000)


def limits(blocks: int = 30_000, seqs: int = 1024, budget: int = 8192) -> SchedulerLimits:
    return SchedulerLimits(seqs, budget, blocks, 16)


def simulate(limit, prompt: int, output: int, load: Load, drift: float = 0.0, kind=Simulation):
    """The scheduler over `load`, every request of `prompt` + `output` tokens."""
    return kind(STEPS, limit, [(prompt, output)] * load.num_prompts, load, OVERHEAD, drift).run()


class OneStepAtATime(Simulation):
    """The same scheduler with the closed-form decode runs turned off."""

    def _quiet_steps(self) -> int:
        return 0


LOADS = [
    (limits(), 1000, 200, Load(200, math.inf, 16)),
    (limits(), 2000, 300, Load(150, 4.0)),
    (limits(blocks=1500), 1500, 1200, Load(60, math.inf, 24)),  # the cache fills: preemption and waiting
    (limits(seqs=8), 300, 100, Load(100)),
]


@pytest.mark.parametrize(("limit", "prompt", "output", "load"), LOADS)
def test_closed_form_runs_equal_stepping(limit, prompt, output, load):
    fast = simulate(limit, prompt, output, load, 1.0)
    slow = simulate(limit, prompt, output, load, 1.0, kind=OneStepAtATime)
    assert fast.preemptions == slow.preemptions
    for fast_record, slow_record in zip(fast.records, slow.records):
        assert fast_record.first_token == pytest.approx(slow_record.first_token, rel=1e-9)
        assert fast_record.finished == pytest.approx(slow_record.finished, rel=1e-9)
    assert fast.gaps.mean() == pytest.approx(slow.gaps.mean(), rel=1e-9)


def test_one_request_is_its_prefill_then_one_decode_step_per_token():
    run = simulate(limits(), 500, 10, Load(1, math.inf, 1))
    record = run.records[0]
    prefill = STEPS.step(0, 0, [(500, 0)]).seconds
    decodes = sum(STEPS.step(1, 500 + i, []).seconds for i in range(9))
    assert record.first_token - record.sent == pytest.approx(OVERHEAD + prefill)
    assert record.finished - record.first_token == pytest.approx(decodes)


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks():
    run = simulate(limits(budget=2048), 5000, 2, Load(1, math.inf, 1))
    chunks = [(2048, 0), (2048, 2048), (904, 4096)]
    expected = sum(STEPS.step(0, 0, [chunk]).seconds for chunk in chunks)
    assert run.records[0].first_token - run.records[0].sent == pytest.approx(OVERHEAD + expected)


def test_max_num_seqs_holds_the_rest_in_the_queue():
    run = simulate(limits(seqs=4), 200, 50, Load(16))
    first_tokens = sorted(r.first_token for r in run.records)
    assert first_tokens[4] > first_tokens[3] + 40 * STEPS.step(4, 1000, []).seconds  # the fifth waits for a slot
    assert max(run.waiting, key=run.waiting.get) == SEQS


def test_a_full_kv_cache_makes_requests_wait_and_preempts_the_last_admitted():
    small = simulate(limits(blocks=600), 2000, 2000, Load(12, math.inf, 12), 1.0)
    ample = simulate(limits(), 2000, 2000, Load(12, math.inf, 12), 1.0)
    assert small.preemptions > 0 and ample.preemptions == 0
    assert small.waiting[KV] > 0 and KV not in ample.waiting
    assert max(r.finished for r in small.records) > max(r.finished for r in ample.records)


def test_poisson_arrivals_have_the_rate_and_are_reproducible():
    times = Load(2000, 5.0).schedule()
    assert times == Load(2000, 5.0).schedule() and times[0] == 0.0
    assert (times[-1] - times[0]) / 1999 == pytest.approx(0.2, rel=0.05)
    assert Load(10).schedule() == [0.0] * 10


def test_metrics_carry_vllm_bench_serve_names():
    metrics = predict(SETUP, 1000, 100, Load(100, math.inf, 8)).metrics
    names = {f"{stat}_{name}_ms" for stat, _ in PERCENTILES for name in ("ttft", "tpot", "itl", "e2el")}
    assert names | {"request_throughput", "output_throughput", "total_token_throughput"} <= set(metrics)
    assert metrics["output_throughput"] == pytest.approx(metrics["request_throughput"] * 100)
    assert metrics["total_token_throughput"] == pytest.approx(metrics["request_throughput"] * 1100)
    assert metrics["median_itl_ms"] <= metrics["p99_itl_ms"]


def test_tpot_is_latency_after_the_first_token_over_the_tokens_after_it():
    run = simulate(limits(), 300, 40, Load(20, math.inf, 4), 1.0)
    metrics = bench_metrics(run.records, run.gaps)
    tpots = [(r.finished - r.first_token) / 39 for r in run.records]
    assert metrics["mean_tpot_ms"] == pytest.approx(1000 * sum(tpots) / len(tpots))


def test_a_thousand_requests_simulate_in_well_under_a_second():
    for load in (Load(1000, math.inf, 64), Load(1000, 20.0), Load(1000)):
        start = time.process_time()
        predict(SETUP, 2048, 512, load)
        assert time.process_time() - start < 0.5
