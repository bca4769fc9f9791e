"""CPU threads: the default is the CPUs this process may use, less those other processes keep busy;
`threads` sets a fixed team, and `kvtool serve --threads` reaches the engine's EngineArgs."""

import os
import subprocess
import sys
import time

import pytest
import torch

from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.errors import UsageError


@pytest.fixture
def restore_threads():
    before, affinity = torch.get_num_threads(), os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, affinity)
    torch.set_num_threads(before)


def test_the_default_follows_the_affinity_not_the_machine(restore_threads):
    assert defaults.default_cpu_threads() == len(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    assert defaults.default_cpu_threads() == 1


@pytest.mark.parametrize("threads", [0, -2, 1.5])
def test_threads_must_be_a_positive_integer(threads):
    with pytest.raises(UsageError, match="threads must be a positive integer"):
        EngineArgs(threads=threads).check_for_engine()


def test_the_engine_steps_with_the_threads_it_was_given(tiny_llama, restore_threads):
    from kvtool.engine.runtime.config import SamplingParams
    from kvtool.engine.runtime.llm import LLM

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    llm = LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20, threads=1)
    assert torch.get_num_threads() == 1
    out = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=3, ignore_eos=True), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 3
    LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20)
    assert torch.get_num_threads() == len(os.sched_getaffinity(0))


def test_serve_threads_flag_reaches_the_engine_config():
    from kvtool.cli.serve_startup import ServeRequest, plan_startup

    plan = plan_startup(ServeRequest(engine_args=EngineArgs(device="cpu", threads=1, max_model_len=512)))
    assert plan.engine_args.threads == 1
    assert plan_startup(ServeRequest(engine_args=EngineArgs(device="cpu"))).engine_args.threads is None


def test_serve_help_documents_threads():
    from typer.testing import CliRunner

    from kvtool.cli.app import app

    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--threads" in result.output


def test_the_team_shrinks_while_another_process_keeps_one_of_its_cpus_busy(restore_threads):
    from kvtool.engine.runtime.worker.cpu_threads import CpuThreads

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or not os.path.exists("/proc/stat"):
        pytest.skip("needs two CPUs and /proc/stat")
    team = CpuThreads(set(cpus[:2]), interval_s=0.3)
    busy = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {cpus[1]})
    )
    try:
        time.sleep(0.6)
        assert team.update() == 1 and torch.get_num_threads() == 1
    finally:
        busy.kill()
        busy.wait()


def test_the_team_follows_the_cpu_time_others_take(restore_threads, monkeypatch):
    from kvtool.engine.runtime.worker import cpu_threads

    # (time, busy seconds of our 4 CPUs, our own CPU seconds) at each sample
    samples = iter([(0.0, 0, 0), (1.0, 4.0, 4.0), (2.0, 8.0, 6.0), (3.0, 12.0, 9.0), (4.0, 15.5, 9.3)])
    clock = [0.0]
    monkeypatch.setattr(cpu_threads, "_sample", lambda cpus: next(samples))
    monkeypatch.setattr(cpu_threads, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    torch.set_num_threads(4)  # as the model runner starts it
    team = cpu_threads.CpuThreads({0, 1, 2, 3}, interval_s=0.5)
    clock[0] = 0.2
    assert team.update() == 4  # too soon to measure: no sample taken
    for now, expected in [(1.0, 4), (2.0, 2), (3.0, 3), (4.0, 1)]:
        clock[0] = now
        assert team.update() == expected and torch.get_num_threads() == expected
    # others took none of the 4 CPUs, then two, one, and 3.2


def test_niced_processes_time_counts_only_for_a_niced_engine():
    from kvtool.engine.runtime.worker.cpu_threads import busy_ticks

    # user nice system idle iowait irq softirq steal guest guest_nice
    stat = [
        "cpu  900 800 60 5000 0 0 0 0 0 0",
        "cpu0 400 0 30 2500 0 0 0 0 0 0",
        "cpu1 500 800 30 2500 7 1 2 3 0 0",
        "intr 12345",
    ]
    assert busy_ticks(stat, {0, 1}, count_nice=False) == 400 + 30 + 500 + 30 + 1 + 2 + 3
    assert busy_ticks(stat, {0, 1}, count_nice=True) == 966 + 800
    assert busy_ticks(stat, {0}, count_nice=True) == 430
