"""Every workload under every load, the largest load that meets the SLO, and how far to trust them: what
`kvtool plan --workload` reports, as one object and as the plan JSON's `performance` and `slo`."""

import math
from dataclasses import dataclass, field, replace

from kvtool.engine.plan.performance.accuracy import BANDS, unchecked, unchecked_line
from kvtool.engine.plan.performance.constants import EFFICIENCIES, Efficiencies
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.predict import Performance, ServingSetup, predict
from kvtool.engine.plan.performance.slo import Slo, largest_concurrency, largest_rate
from kvtool.engine.plan.request import Workload


@dataclass(frozen=True)
class SloAnswer:
    workload: Workload
    slo: Slo
    max_concurrency: int
    max_request_rate: float


@dataclass(frozen=True)
class Forecast:
    runs: list[tuple[Workload, Performance]]
    slo: list[SloAnswer] = field(default_factory=list)
    note: str | None = None  # what no real measurement has checked


def forecast(
    setup: ServingSetup,
    workloads: list[Workload],
    loads: list[Load],
    slo: Slo | None = None,
    release: tuple[int, ...] | None = None,
    eff: Efficiencies = EFFICIENCIES,
) -> Forecast:
    runs = [
        (workload, predict(setup, workload.prompt_tokens, workload.output_tokens, load, eff))
        for workload in workloads
        for load in loads
    ]
    answers = [_slo_answer(setup, workload, slo, loads[0], eff) for workload in workloads] if slo else []
    return Forecast(runs, answers, unchecked_line(unchecked(setup, release)))


def _slo_answer(setup: ServingSetup, workload: Workload, slo: Slo, base: Load, eff: Efficiencies) -> SloAnswer:
    def slack(load: Load) -> float:
        return slo.slack(predict(setup, workload.prompt_tokens, workload.output_tokens, load, eff).metrics)

    base = replace(base, request_rate=math.inf, max_concurrency=None)
    saturated = predict(setup, workload.prompt_tokens, workload.output_tokens, base, eff).metrics["request_throughput"]
    clients = largest_concurrency(slack, base, min(setup.max_num_seqs, base.num_prompts))
    return SloAnswer(workload, slo, clients, largest_rate(slack, base, saturated))


def forecast_json(result: Forecast) -> dict:
    """`performance` (one entry per workload and load, `vllm bench serve`'s names) and `slo`."""
    return {
        "performance": [_run_json(workload, run) for workload, run in result.runs],
        "slo": [_slo_json(answer) for answer in result.slo],
    }


def _run_json(workload: Workload, run: Performance) -> dict:
    load = run.load
    return {
        "workload": {
            "name": workload.name,
            "input_tokens": workload.prompt_tokens,
            "output_tokens": workload.output_tokens,
        },
        "num_prompts": load.num_prompts,
        "request_rate": "inf" if math.isinf(load.request_rate) else load.request_rate,
        "max_concurrency": load.max_concurrency,
        "lengths": load.lengths.name,
        **{key: round(value, 3) for key, value in run.metrics.items()},
        "bound": run.bound,
        "preemptions": run.preemptions,
        "band": BANDS,
    }


def _slo_json(answer: SloAnswer) -> dict:
    return {
        "workload": answer.workload.name,
        "targets": answer.slo.limits_ms,
        "max_concurrency": answer.max_concurrency,
        "max_request_rate": round(answer.max_request_rate, 3),
    }
