"""The CPU engine's malloc thresholds (worker/cpu_malloc.py): the blocks one prefill frees are the memory
the next one gets, instead of pages faulted in again. Measured in fresh interpreters, since the setting
is the process's."""

import subprocess
import sys

import pytest

PREFILL_FAULTS = """
import resource, sys
from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM
llm = LLM(sys.argv[1], dtype="float32", max_model_len=2048, kv_cache_memory=96 << 20)
params = SamplingParams(max_tokens=1)
llm.generate([list(range(100, 1600))], params, use_tqdm=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
llm.generate([list(range(2000, 3500))], params, use_tqdm=False)  # another 1,500-token prefill
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def prefill_faults(folder) -> int:
    run = subprocess.run(  # in the model's folder: a clone's root would put its kernels/ before the kernels package
        [sys.executable, "-c", PREFILL_FAULTS, str(folder)], capture_output=True, text=True, check=True, cwd=folder
    )
    return int(run.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_second_prefill_reuses_the_memory_of_the_first(smollm2_dir):
    """Re-faulting its activations costs a 1,500-token fp32 prefill about 70,000 pages; glibc's defaults do
    that on some runs and not others (its mmap threshold moves with what was freed), so only the kept
    case has a bound."""
    assert prefill_faults(smollm2_dir) < 10_000
