"""A CUDA out-of-memory error is placed at start-up or at run time by what surrounds it, and the
finding says which line decided it."""

from kvtool.engine.diagnosis import diagnose_text

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.10 GiB is free. Of the allocated memory 75.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved "
    "by PyTorch but unallocated."
)
W = "(EngineCore_DP0 pid=812) ERROR 05-01 14:39:06 [core.py:708] "


def frames(*names: str) -> str:
    return (
        W
        + "Traceback (most recent call last):\n"
        + "".join(
            f'{W}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/x.py", line {i}, in {name}\n'
            f"{W}    self.{name}()\n"
            for i, name in enumerate(names, 1)
        )
    )


def only_oom(text: str):
    [finding] = [f for f in diagnose_text(text).findings if f.category.startswith("cuda_oom")]
    return finding


def test_kv_cache_allocation_frames_make_it_a_start_up_failure():
    finding = only_oom(
        frames("__init__", "_initialize_kv_caches", "initialize_kv_cache", "_allocate_kv_cache_tensors")
        + W
        + OOM
        + "\n"
    )
    assert (finding.category, finding.stage) == ("cuda_oom_startup", "startup")
    assert "KV cache allocation" in finding.summary and "_allocate_kv_cache_tensors" in finding.stage_evidence
    assert finding.to_dict()["stage_evidence"] == finding.stage_evidence
    assert finding.fixes[0].flag == "--gpu-memory-utilization"


def test_v0_profiling_through_execute_model_is_still_start_up():
    finding = only_oom(frames("determine_num_available_blocks", "profile_run", "execute_model") + W + OOM + "\n")
    assert finding.stage == "startup" and "memory profiling" in finding.summary
    assert "profile_run" in finding.stage_evidence


def test_engine_step_frames_make_it_a_run_time_failure():
    finding = only_oom(
        frames("run_busy_loop", "step", "execute_model")
        + W
        + OOM
        + "\n"
        + W
        + "EngineCore encountered a fatal error.\n"
    )
    assert (finding.category, finding.stage) == ("cuda_oom_runtime", "runtime")
    assert "in execute_model" in finding.stage_evidence


def test_what_follows_the_error_decides_when_nothing_precedes_it():
    finding = only_oom(
        OOM + "\n\n(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause "
        "above. Failed core proc(s): {}\n"
    )
    assert finding.stage == "startup" and "initialization failed" in finding.stage_evidence


def test_a_server_that_served_requests_fails_at_run_time():
    text = (
        "INFO 05-01 14:00:00 [gpu_model_runner.py:1] Capturing CUDA graphs (mixed prefill-decode): 100%\n"
        "INFO:     Application startup complete.\n"
        'INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' + OOM + "\n"
    )
    finding = only_oom(text)
    assert finding.stage == "runtime" and "Application startup complete" in finding.stage_evidence
    assert any("while serving" in note for note in finding.notes)


def test_no_sign_at_all_is_stage_unknown_with_the_fixes_of_both():
    finding = only_oom(OOM)
    assert finding.stage == "unknown" and finding.stage_evidence is None
    assert any("stage is unknown" in note for note in finding.notes)
    assert finding.fixes[0].flag == "--max-num-batched-tokens"  # the start-up fixes first
    [serving] = finding.alternatives
    assert serving.category == "cuda_oom_runtime" and serving.fixes[0].flag == "--gpu-memory-utilization"
    assert finding.to_dict()["alternatives"][0]["category"] == "cuda_oom_runtime"


def test_a_dummy_run_is_start_up_unless_a_data_parallel_rank_runs_it_while_serving():
    assert only_oom(frames("profile_run", "_dummy_run") + W + OOM + "\n").stage == "startup"
    assert only_oom(frames("_dummy_run") + W + OOM + "\n").stage == "startup"
    finding = only_oom(frames("execute_dummy_batch", "_dummy_run") + W + OOM + "\n")
    assert (finding.category, finding.stage) == ("cuda_oom_runtime", "runtime")
