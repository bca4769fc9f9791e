"""The budget of a start-up log's run (engine/startup_log/budget.py), as diagnose would take it: from sizing
alone, with its own estimate of the parts the log does not print."""

import pytest
from from_log_cases import HERE

from kvtool.engine.sizing import catalog
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.memory_budget import memory_budget
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import (
    CATALOG,
    DERIVED,
    ESTIMATED,
    MEASURED,
    catalog_gpu,
    log_budget,
    log_gpu,
)
from kvtool.engine.startup_log.reader import read_startup_log_file


@pytest.mark.parametrize(
    ("device", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA GeForce RTX 3090", "RTX-3090"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("Tesla T4", "T4"),
        ("NVIDIA GB10", "GB10"),
        ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", None),  # a slice: not the card's memory
        ("Some Accelerator", None),
    ],
)
def test_a_device_name_as_cuda_prints_it_finds_its_catalog_gpu(device, gpu):
    found = catalog_gpu(device)
    assert (found.name if found else None) == gpu


def test_the_gpu_is_what_the_log_prints_else_the_device_it_names_else_unknown():
    printed = log_gpu(read_startup_log_file(HERE / "releases" / "0.26.0.log"))
    assert printed.total_bytes == round(79.19 * GiB) and printed.free_bytes == round(78.63 * GiB)
    named = log_gpu(read_startup_log_file(HERE / "releases" / "0.10.0.log"))  # device_name=NVIDIA_A100-SXM4-80GB
    assert (named.name, named.source) == ("A100-80GB", CATALOG)
    assert log_gpu(read_startup_log_file(HERE / "releases" / "0.19.1.log")) is None


def measured(version: str, model: str, tp: int, total_gib: float | None):
    """The log's budget with an estimate made from sizing alone (the log's GPU, or any for a derived one)."""
    log = read_startup_log_file(HERE / "releases" / f"{version}.log")
    spec = catalog.find(model).spec()
    total = round((total_gib or 80) * GiB)
    estimate = memory_budget(
        spec,
        total,
        EngineConfig.of(
            gpu_memory_utilization=log.gpu_memory_utilization or 0.9,
            tensor_parallel_size=tp,
            max_num_batched_tokens=8192,
        ),
    )
    cache = KVCacheSpec(spec, KVLayout(tp=tp))
    return log_budget(log, estimate, cache, log.max_model_len, MEASURED if total_gib else None)


def test_a_log_that_prints_every_part_is_measured_whole():
    budget = measured("0.26.0", "gemma-3-27b", 1, 79.19)
    assert {source for source in budget.sources.values()} == {MEASURED}
    assert budget.budget.kv_cache_bytes == round(14.69 * GiB)
    assert budget.budget.cudagraph_bytes == round(0.88 * GiB)  # the estimate 0.26 took off, not the 0.91 captured
    assert budget.budget.activation_bytes == pytest.approx(3.91 * GiB, abs=0.03 * GiB)


def test_the_unknown_of_a_partial_log_is_solved_from_its_budget():
    """0.21.0 prints weights, the graph estimate and the KV cache: with the GPU's memory the rest is the
    activation peak and non-torch memory together; without it, the GPU's memory."""
    with_gpu, without = measured("0.21.0", "qwen3-32b", 2, 79.19), measured("0.21.0", "qwen3-32b", 2, None)
    kv = with_gpu.budget.kv_cache_bytes  # 38.79 GiB, set inside the block of the 317,728 tokens printed
    rest = with_gpu.budget.requested_bytes - round(30.59 * GiB) - round(1.02 * GiB) - kv
    assert with_gpu.figures(DERIVED).keys() == {"activation_bytes", "non_torch_bytes"}
    assert sum(with_gpu.figures(DERIVED).values()) == rest
    assert without.sources["total_bytes"] == DERIVED and without.sources["activation_bytes"] == ESTIMATED
    assert kv == without.budget.kv_cache_bytes == pytest.approx(38.79 * GiB, abs=0.005 * GiB)
