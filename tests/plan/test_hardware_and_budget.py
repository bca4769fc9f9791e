"""GPU facts and the per-GPU memory budget."""

import json
import math
import sys

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery import gpus
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.defaults import default_scheduler_limits
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.gpus import GpuProcess, find_gpu
from kvtool.engine.sizing.memory_budget import memory_budget
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.weights import weights_bytes
from kvtool.errors import UsageError


@pytest.mark.parametrize(
    "name, canonical",
    [("H100", "H100-80GB"), ("nvidia h100-80gb", "H100-80GB"), ("4090", "RTX-4090"), ("a100-80g", "A100-80GB")],
)
def test_gpu_catalog_names_and_aliases(name, canonical):
    assert find_gpu(name).name == canonical


def test_unknown_gpu_suggests_close_names():
    with pytest.raises(UsageError, match="Did you mean H100-80GB"):
        find_gpu("H100-80")


def test_gpu_mem_overrides_a_named_gpu_size_and_repeats_for_num_gpus():
    found = gpus.resolve_gpus("L4", "20GiB", 2)
    assert [(g.name, g.total_bytes) for g in found] == [("L4", 20 * GiB)] * 2


def test_no_local_gpu_without_a_name_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(gpus, "read_local_gpus", lambda indices=None: [])
    with pytest.raises(UsageError, match="no GPU found"):
        gpus.resolve_gpus(None, None, None)


def test_budget_subtracts_every_non_kv_term():
    spec = resolve_model_spec("llama3.1-8b")
    budget = memory_budget(
        spec, 80 * GiB, EngineConfig.of(gpu_memory_utilization=0.92, max_num_batched_tokens=8192, max_num_seqs=1024)
    )
    assert budget.requested_bytes == math.ceil(80 * GiB * 0.92)
    assert budget.weights_bytes == spec.num_parameters * 2
    assert budget.kv_cache_bytes == (
        budget.requested_bytes
        - budget.weights_bytes
        - budget.activation_bytes
        - budget.non_torch_bytes
        - budget.cudagraph_bytes
    )
    smaller = memory_budget(
        spec, 80 * GiB, EngineConfig.of(gpu_memory_utilization=0.92, max_num_batched_tokens=2048, max_num_seqs=1024)
    )
    assert smaller.activation_bytes < budget.activation_bytes  # the peak grows with batched tokens
    eager = memory_budget(spec, 80 * GiB, EngineConfig.of(gpu_memory_utilization=0.92, enforce_eager=True))
    assert eager.cudagraph_bytes == 0


def test_tensor_parallel_splits_weights_and_quantization_shrinks_them():
    spec = resolve_model_spec("llama3.1-70b")
    assert (
        memory_budget(spec, 80 * GiB, EngineConfig.of(tensor_parallel_size=4)).weights_bytes
        == spec.num_parameters * 2 // 4
    )
    embeddings = 2 * 128256 * 8192  # input and output embeddings stay bf16 under fp8
    assert weights_bytes(spec, quantization="fp8") == (spec.num_parameters - embeddings) * 1 + embeddings * 2
    deepseek = resolve_model_spec("deepseek-v3")  # fp8 in 128 x 128 blocks, one fp32 scale each; embeddings bf16
    embeddings = 2 * 129280 * 7168
    linear = deepseek.num_parameters - embeddings if deepseek.num_parameters > 671e9 else 671_025_397_760 - embeddings
    assert weights_bytes(deepseek) == int(linear * (1 + 4 / (128 * 128)) + embeddings * 2)


def test_vllm_scheduler_defaults_by_gpu_class():
    assert default_scheduler_limits(int(79.1 * GiB), "H100-80GB") == (8192, 1024)
    assert default_scheduler_limits(int(79.2 * GiB), "A100-80GB") == (2048, 256)
    assert default_scheduler_limits(int(22 * GiB), "L4") == (2048, 256)
    assert default_scheduler_limits(int(178 * GiB), "B200") == (16384, 1024)


def test_utilization_outside_0_1_is_refused():
    with pytest.raises(UsageError, match=r"must be in \(0, 1\]"):
        memory_budget(resolve_model_spec("smollm2"), 8 * GiB, EngineConfig.of(gpu_memory_utilization=1.2))


class FakeNvml:
    """An NVML with one 80 GiB device where another process holds 30 GiB; v2 memory info is missing."""

    nvmlMemory_v2 = 2

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if version is not None:
            raise RuntimeError("NVML_ERROR_FUNCTION_NOT_FOUND")
        return type("Memory", (), {"total": 80 * GiB, "free": 50 * GiB, "used": 30 * GiB})

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("Process", (), {"pid": 4242, "usedGpuMemory": 30 * GiB})]

    def nvmlDeviceGetMigMode(self, handle):
        return (0, 0)


def test_nvml_readings_and_memory_held_by_others(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    (gpu,) = gpus.read_local_gpus()
    assert (gpu.name, gpu.total_bytes, gpu.free_bytes, gpu.mig_mode) == (
        "NVIDIA H100 80GB HBM3",
        80 * GiB,
        50 * GiB,
        False,
    )
    assert gpu.processes == (GpuProcess(4242, 30 * GiB),)
    result = CliRunner().invoke(app, ["plan", "--model", "llama3.1-8b", "--json"])
    report = json.loads(result.stdout)
    assert report["gpu"]["processes"] == [{"pid": 4242, "used_bytes": 30 * GiB}]
    assert any("50.0 GiB free, less than the" in w for w in report["warnings"])
    with pytest.raises(UsageError, match="GPU 3 does not exist"):
        gpus.read_local_gpus([3])


@pytest.mark.gpu
def test_real_nvml_reading():
    found = gpus.read_local_gpus()
    if not found:
        pytest.skip("no NVIDIA GPU visible")
    assert all(g.total_bytes > 0 and g.free_bytes <= g.total_bytes for g in found)
