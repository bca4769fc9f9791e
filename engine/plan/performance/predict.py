"""Served performance of one configuration under one load: the scheduler simulated over the step-time model,
reported as `vllm bench serve` reports a run, with what limits it (`bound`)."""

from dataclasses import dataclass, field
from functools import cached_property

from kvtool.engine.plan.performance.constants import EFFICIENCIES, Efficiencies
from kvtool.engine.plan.performance.hardware import GpuFigures
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.metrics import bench_metrics
from kvtool.engine.plan.performance.model_cost import model_cost
from kvtool.engine.plan.performance.scheduler import Simulation
from kvtool.engine.plan.performance.sim_request import SchedulerLimits
from kvtool.engine.plan.performance.step_time import StepModel
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.quantization import QuantFacts
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.weights import element_bytes, model_quant_facts

QUEUE_BOUND_SHARE = 0.10  # waiting above this share of the requests' time names the queue's cause as the bound


@dataclass(frozen=True)
class ServingSetup:
    """What the served-performance model needs, as plan resolved it: the model, the GPU's figures, the
    EngineConfig the release would run with, and the KV pool plan sized."""

    spec: ModelSpec
    gpu: GpuFigures
    config: EngineConfig
    kv_bytes_per_token: int  # per GPU, every attention layer
    num_blocks: int  # the KV pool, vLLM's null block included

    @property
    def tp(self) -> int:
        return self.config.parallel_config.tensor_parallel_size

    @property
    def max_num_seqs(self) -> int:
        return self.config.scheduler_config.max_num_seqs

    @property
    def limits(self) -> SchedulerLimits:
        scheduler = self.config.scheduler_config
        return SchedulerLimits(
            scheduler.max_num_seqs,
            scheduler.max_num_batched_tokens,
            self.num_blocks - 1,
            self.config.cache_config.block_size,
        )

    @cached_property
    def quantization(self) -> QuantFacts | None:
        return model_quant_facts(self.spec, self.config.model_config.quantization)

    @cached_property
    def element_bytes(self) -> int:
        return element_bytes(self.spec, self.config.model_config.dtype)

    @cached_property
    def steps(self) -> StepModel:
        return _step_model(self, EFFICIENCIES)


@dataclass(frozen=True)
class Performance:
    load: Load
    input_tokens: int
    output_tokens: int
    metrics: dict[str, float]
    bound: str
    preemptions: int
    waiting: dict[str, float] = field(default_factory=dict)


def step_model(setup: ServingSetup, eff: Efficiencies = EFFICIENCIES) -> StepModel:
    """The setup's step model; at the default constants the same one each time, so that every load forecast
    for the setup (an SLO search runs a few dozen) shares its cache of step times."""
    return setup.steps if eff is EFFICIENCIES else _step_model(setup, eff)


def _step_model(setup: ServingSetup, eff: Efficiencies) -> StepModel:
    cost = model_cost(
        setup.spec, setup.quantization, setup.tp, setup.kv_bytes_per_token, setup.gpu, setup.element_bytes
    )
    return StepModel(cost, setup.gpu, eff, setup.config.scheduler_config.async_scheduling)


def predict(
    setup: ServingSetup, input_tokens: int, output_tokens: int, load: Load, eff: Efficiencies = EFFICIENCIES
) -> Performance:
    limits = setup.limits
    steps = step_model(setup, eff)
    clients = load.max_concurrency or 0
    drift = request_latency(steps, input_tokens, output_tokens, clients) if load.closed_loop else 0.0
    max_total = setup.config.model_config.max_model_len or input_tokens + output_tokens
    lengths = load.lengths.draw(input_tokens, output_tokens, load.num_prompts, max_total, load.seed)
    simulation = Simulation(steps, limits, lengths, load, eff.request_overhead_s, drift)
    outcome = simulation.run()
    metrics = bench_metrics(outcome.records, outcome.gaps)
    return Performance(
        load, input_tokens, output_tokens, metrics, _bound(outcome, metrics), outcome.preemptions, outcome.waiting
    )


def request_latency(steps: StepModel, input_tokens: int, output_tokens: int, clients: int) -> float:
    """One request's latency in a closed loop of `clients`, roughly: its own decode steps beside the others,
    and every client's prefill once per cycle."""
    prefill = steps.step(0, 0, [(input_tokens, 0)]).seconds
    decode = steps.step(clients, clients * (input_tokens + output_tokens // 2), []).seconds
    return clients * prefill + (output_tokens - 1) * decode


def _bound(outcome, metrics: dict[str, float]) -> str:
    """The queue's main cause when requests waited a tenth of their time or more, else whichever of FLOPs and
    bytes set the pace of most of the busy time."""
    waited = sum(outcome.waiting.values())
    in_system = metrics["mean_e2el_ms"] / 1000 * metrics["completed"]
    if waited > QUEUE_BOUND_SHARE * in_system:
        return max(outcome.waiting, key=outcome.waiting.get)
    return "compute" if outcome.compute_seconds > outcome.busy_seconds / 2 else "bandwidth"
