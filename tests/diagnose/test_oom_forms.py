"""Out-of-memory errors in every form a device prints them, placed at start-up, while serving, or at a stage
the paste does not tell (then both, start-up's fixes first); the CUDA graph share of the KV cache budget."""

import pytest

from kvtool.engine.diagnosis import diagnose_text

W = "(Worker_TP3 pid=150714) ERROR 09-14 07:53:16 [multiproc_executor.py:674] "


def oom(text: str):
    [finding] = [f for f in diagnose_text(text).findings if f.category.startswith("cuda_oom")]
    return finding


@pytest.mark.parametrize(
    "line",
    [
        "torch.AcceleratorError: CUDA error: out of memory",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: CUDA driver error: out of memory",
        "Cuda failure 'out of memory'",
        "RuntimeError: NCCL error: unhandled cuda error, NCCL version 2.21.5 Last error: Cuda failure 2 'out of memory'",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cudaErrorMemoryAllocation: out of memory",
        "triton.runtime.errors.OutOfResources... CUDA_ERROR_OUT_OF_MEMORY",
        "RuntimeError: HIP error: out of memory",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to "
        "avoid fragmentation.",
    ],
)
def test_an_out_of_memory_error_without_sizes_is_one_with_its_stage_unknown(line):
    finding = oom(W + line + "\n")
    assert finding.category == "cuda_oom_startup" and finding.stage == "unknown"
    assert [a.category for a in finding.alternatives] == ["cuda_oom_runtime"]


@pytest.mark.parametrize(
    "line, numbers",
    [
        (
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of "
            "191.98 GiB of which 1.20 GiB is free.",
            dict(tried_to_allocate_gib=1.96, total_gib=191.98, free_gib=1.2),
        ),
        (
            "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; 57.43 GiB "
            "already allocated; 57.43 GiB current active; 1.10 GiB free; 58.80 GiB reserved in total by PyTorch)",
            dict(tried_to_allocate_gib=2.0, total_gib=60.97, allocated_gib=57.43, free_gib=1.1, reserved_gib=58.8),
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 48.00 MiB. GPU 7 has a total capacity of "
            "79.19 GiB of which 43.00 MiB is free. Of the allocated memory 72.09 GiB is allocated by PyTorch, and "
            "371.74 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
            "setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
            dict(tried_to_allocate_gib=0.0469, free_gib=0.042, reserved_unallocated_gib=0.363),
        ),
    ],
)
def test_the_sizes_are_read_whatever_the_device(line, numbers):
    finding = oom(line)
    assert {name: finding.numbers[name] for name in numbers} == numbers
    assert finding.numbers.get("occurrences") is None  # one error, though its message holds several signs


def test_an_oom_inside_torch_cuda_graph_capture_is_a_start_up_failure():
    text = (
        f'{W}  File "/envs/x/lib/python3.12/site-packages/torch/cuda/graphs.py", line 104, in capture_end\n'
        f"{W}    super().capture_end()\n{W}torch.AcceleratorError: CUDA error: out of memory\n"
    )
    finding = oom(text)
    assert (finding.category, finding.stage) == ("cuda_oom_startup", "startup")
    assert "CUDA graph capture" in finding.summary and finding.fixes[0].flag == "--enforce-eager"


@pytest.mark.parametrize(
    "before, after, stage",
    [
        ('INFO:     10.0.0.1:4000 - "GET /health HTTP/1.1" 200 OK\n', "", "runtime"),
        ("Processed prompts:  12%|█▏        | 120/1000 [00:31<03:50]\n", "", "runtime"),
        ("", "Exception in callback _log_task_completion(error_callback=<bound method>)\n", "runtime"),
        ('Run failed: {"message":"An error occurred during streaming"}\n', "", "runtime"),
        ("INFO 05-01 14:00:00 [gpu_worker.py:298] Available KV cache memory: 52.10 GiB\n", "", "startup"),
        ("INFO 05-01 14:00:00 [gpu_model_runner.py:1] Model loading took 14.99 GiB and 20.1 seconds\n", "", "startup"),
        ("", "", "unknown"),
    ],
)
def test_the_lines_around_an_error_place_it(before, after, stage):
    error = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 318.00 MiB. GPU 0 has a total capacity of 23.53 GiB of which 315.44 MiB is free.\n"
    finding = oom(before + error + after)
    assert finding.stage == stage
    assert finding.category == ("cuda_oom_runtime" if stage == "runtime" else "cuda_oom_startup")


def test_a_progress_line_before_a_later_traceback_still_places_it():
    text = (
        "INFO 05-01 14:00:00 [gpu_model_runner.py:1] Model loading took 14.99 GiB and 20.1 seconds\n"
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/v1/engine/core.py", line 1, in __init__\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n"
    )
    finding = oom(text)
    assert finding.stage == "startup" and "memory profiling" in finding.summary


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: unable to mmap 18329065000 bytes from file <model.safetensors>: Cannot allocate memory (12)",
        "OSError: [Errno 12] Cannot allocate memory",
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376",
        "except torch.cuda.OutOfMemoryError as e:",
    ],
)
def test_host_memory_and_other_resources_are_no_gpu_oom(line):
    assert not diagnose_text(line).findings


GRAPH_ESTIMATE = "(EngineCore_DP0 pid=7) INFO 01-01 10:00:00 [gpu_model_runner.py:6043] Estimated CUDA graph memory: 3.25 GiB total\n"
NO_BLOCKS = (
    "(EngineCore_DP0 pid=7) ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the "
    "CPU backend, despite its name).\n"
)


def test_graphs_that_took_what_the_kv_cache_lacked_are_the_cause():
    available = "(EngineCore_DP0 pid=7) INFO 01-01 10:00:00 [gpu_worker.py:440] Available KV cache memory: -1.2 GiB\n"
    [finding] = diagnose_text(GRAPH_ESTIMATE + available + NO_BLOCKS).findings
    assert finding.category == "cuda_oom_startup" and finding.numbers["cuda_graph_estimate_gib"] == 3.25
    assert finding.fixes[0].flag == "--enforce-eager"
    assert [a.category for a in finding.alternatives] == ["no_cache_blocks"]


def test_graphs_too_small_to_matter_leave_the_budget_finding_first():
    available = "(EngineCore_DP0 pid=7) INFO 01-01 10:00:00 [gpu_worker.py:440] Available KV cache memory: -9.5 GiB\n"
    [finding] = diagnose_text(GRAPH_ESTIMATE + available + NO_BLOCKS).findings
    assert finding.category == "no_cache_blocks"
    assert [a.category for a in finding.alternatives] == ["cuda_oom_startup"]
    assert "--enforce-eager" in [fix.flag for fix in finding.fixes]


def test_a_start_up_that_failed_after_the_graph_memory_warning_is_a_capture_oom():
    text = (
        "(EngineCore_DP0 pid=7) WARNING 01-01 10:00:00 [gpu_worker.py:470] CUDA graph memory profiling is disabled "
        "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph memory is not accounted for during KV "
        "cache allocation, which may require lowering --gpu-memory-utilization to avoid OOM. Consider re-enabling "
        "it (the default as of v0.21.0) and increasing --gpu-memory-utilization from 0.9000 to 0.9410.\n"
        "(EngineCore_DP0 pid=7) ERROR 01-01 10:00:02 [core.py:708] EngineCore failed to start.\n"
    )
    [finding] = diagnose_text(text).findings
    assert finding.category == "cuda_oom_startup" and "CUDA graph capture" in finding.summary
    assert [(fix.flag, fix.value) for fix in finding.fixes[:2]] == [
        ("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", 1),
        ("--gpu-memory-utilization", 0.941),
    ]
    served = text.replace("EngineCore failed to start.", "Application startup complete.")
    assert not diagnose_text(served).findings


def test_another_process_named_by_pytorch_is_the_cause():
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "23.65 GiB of which 3.06 MiB is free. Process 2201 has 16.85 GiB memory in use. Including non-PyTorch "
        "memory, this process has 6.79 GiB memory in use."
    )
    [finding] = diagnose_text(line).findings
    assert finding.category == "gpu_memory_held_by_others"
    assert finding.numbers["other_process_gib"] == 16.85 and finding.numbers["max_gpu_memory_utilization"] == 0.28
    assert [fix.flag for fix in finding.fixes] == ["CUDA_VISIBLE_DEVICES", "--gpu-memory-utilization"]
    assert [a.category for a in finding.alternatives] == ["cuda_oom_startup", "cuda_oom_runtime"]  # stage unknown
    small = line.replace("16.85 GiB memory in use. Including", "0.85 GiB memory in use. Including")
    assert diagnose_text(small).findings[0].category == "cuda_oom_startup"


def test_xla_resource_exhausted_is_an_out_of_memory_error():
    line = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
        "allocate 2.00G. That was not possible. There are 1.56G free."
    )
    assert oom(line).stage == "unknown"
