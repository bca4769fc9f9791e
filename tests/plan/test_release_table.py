"""`kvtool plan` against start-up figures across vLLM releases, from V0 (0.2) to the newest (0.33).

No public start-up log we could find gives model, GPU, dtype, gpu_memory_utilization and max_model_len
together with the figures vLLM printed: vLLM's own docs and examples hold only unattributed excerpts
("# GPU blocks: 790", "GPU KV cache size: 643,232 tokens" with no model or GPU named). So every row
below is worked arithmetic: the release's own formula (file and function named in the row), applied
by hand to the model's facts and to plan's stated estimates of the terms vLLM measures on a GPU
(activation peak, non-torch memory, CUDA graphs), each written out here. A row checks which terms
that release charges, its defaults, its rounding, its block count and the figures it logs.
"""

import json
import math
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing.profile_run import RESERVED_OVER_ALLOCATED

GiB, MiB = 1 << 30, 1 << 20
LLAMA = resolve_model_spec("llama3.1-8b")
W = LLAMA.num_parameters * 2  # bf16 weights
VOCAB, HIDDEN = 128256, 4096
# the profile forward per token (plan's estimate): residual and normed input, then the larger of q/k/v and
# the gate-up output with its activation
A = 2 * (2 * 4096 + max((32 + 2 * 8) * 128, 3 * 14336))
A_TP2 = 2 * (2 * 4096 + max((32 + 2 * 8) * 128 // 2, 3 * 14336 // 2))


def peak(tokens: int, rows: int, bytes_per_logit: int, forward: int = A) -> int:
    """The profile's peak: the forward, or the hidden states kept plus the sampler, whichever is larger."""
    return max(tokens * forward, tokens * HIDDEN * 2 + rows * VOCAB * bytes_per_logit)


def held(peak_bytes: int) -> int:
    """0.2.6 - 0.6.3 take what torch's caching allocator still holds after the profile (plan's fitted ratio)."""
    return round(peak_bytes * RESERVED_OVER_ALLOCATED)


V0_SORT, FLASHINFER = 38, 14  # sampler bytes per logit: V0's sort path; FlashInfer (V1 0.8 - 0.11, 0.21+)
N_V0, N_V1, CONTEXT = 50 * MiB, 20 * MiB, 450 * MiB  # non-torch memory (plan's estimates)
N_HPC, NCCL_PEER = 250 * MiB, 120 * MiB  # V1 on SM 8.0 / 9.0 / 10.x; NCCL per peer rank without NVSwitch


def graphs(piecewise: int, full: int) -> int:
    """plan's CUDA-graph estimate for Llama-3.1-8B: 0.1 GiB, and 0.25 MiB per captured piece (33 per
    PIECEWISE size: 32 layers + 1, one per FULL size)."""
    return int(GiB // 10 + (piecewise * 33 + full) * MiB // 4)


G = graphs(51, 51)  # 0.12+: 1, 2, 4, 8..248 by 8, 256..512 by 16 (min(2 x 1024, 512)); FULL up to 1024 seqs
G_B200 = graphs(83, 83)  # 0.28+ on Blackwell: up to 1024 tokens
BLOCK = 16 * 131072  # Llama-3.1-8B, 16 tokens x 128 KiB
H100 = int(79.19 * GiB)


@dataclass(frozen=True)
class Row:
    version: str
    source: str  # where the release computes it
    args: tuple[str, ...]
    kv_cache_bytes: int
    max_num_batched_tokens: int
    block_bytes: int = BLOCK
    tokens_from_concurrency: bool = False
    num_cpu_blocks: int = 0


ROWS = [
    Row(
        "0.2.0",
        "worker/worker.py profile_num_available_blocks: total x util - torch max_memory_allocated",
        ("--gpu-mem", "80GiB", "--max-model-len", "4096"),
        int(80 * GiB * 0.9) - W - peak(4096, 256, V0_SORT),
        4096,
        num_cpu_blocks=2048,
    ),
    Row(
        "0.5.2",
        "worker/worker.py determine_num_available_blocks: init free - free after a max_model_len profile",
        ("--gpu-mem", "80GiB", "--max-model-len", "32768"),
        int(80 * GiB * 0.9) - W - held(peak(32768, 256, V0_SORT)) - N_V0,
        32768,
        num_cpu_blocks=2048,
    ),
    Row(
        "0.6.3",
        "engine/arg_utils.py: chunked prefill on above 32k, 512-token profile batch",
        ("--gpu-mem", "80GiB", "--max-model-len", "131072"),
        int(80 * GiB * 0.9) - W - held(peak(512, 256, V0_SORT)) - N_V0,
        512,
        num_cpu_blocks=2048,
    ),
    Row(
        "0.8.5",
        "v1/worker/gpu_worker.py determine_available_memory: total x util - (torch peak + total - free - torch)",
        ("--gpu", "H100-80GB", "--max-model-len", "32768"),
        int(H100 * 0.9) - W - peak(8192, 1024, FLASHINFER) - CONTEXT,
        8192,
    ),
    Row(
        "0.11.0",
        "v1/worker/gpu_worker.py: baseline after NCCL init, but NCCL allocates its buffers at the first collective",
        ("--gpu-mem", "80GiB", "--tp", "2", "--max-model-len", "32768"),
        int(80 * GiB * 0.9) - W // 2 - peak(8192, 1024, FLASHINFER, A_TP2) - N_V1 - NCCL_PEER,
        8192,
        block_bytes=BLOCK // 2,
    ),
    Row(
        "0.20.0",
        "v1/worker/gpu_worker.py: ceil(total x 0.92) - non-KV - CUDA graph estimate",
        ("--gpu-mem", "80GiB", "--max-model-len", "32768"),
        math.ceil(80 * GiB * 0.92) - W - peak(8192, 1024, 14) - N_V1 - G,
        8192,
    ),
    Row(
        "0.20.1",
        "v1/core/kv_cache_utils.py: logged tokens = int(max_concurrency x max_model_len)",
        ("--gpu-mem", "80GiB", "--max-model-len", "30000"),
        math.ceil(80 * GiB * 0.92) - W - peak(8192, 1024, 14) - N_V1 - G,
        8192,
        tokens_from_concurrency=True,
    ),
    Row(
        "0.28.0",
        "engine/arg_utils.py get_batch_defaults: 16384 / 1024 on GPUs of 160 GiB and more",
        ("--gpu", "B200", "--max-model-len", "32768"),
        math.ceil(int(178.4 * GiB) * 0.92) - W - peak(16384, 1024, FLASHINFER) - N_HPC - G_B200,
        16384,
        tokens_from_concurrency=True,
    ),
    Row(
        "0.33.0",
        "v1/worker/gpu_worker.py + v1/core/kv_cache_utils.py (newest release)",
        ("--gpu", "H100-80GB", "--max-model-len", "131072"),
        math.ceil(H100 * 0.92) - W - peak(8192, 1024, FLASHINFER) - N_HPC - G,
        8192,
        tokens_from_concurrency=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.version for row in ROWS])
def test_plan_matches_the_releases_arithmetic(row):
    args = ["plan", "--model", "llama3.1-8b", "--vllm-version", row.version, *row.args, "--json"]
    result = CliRunner().invoke(app, args)
    report = json.loads(result.stdout)
    length, blocks = report["max_model_len"], row.kv_cache_bytes // row.block_bytes
    assert report["max_num_batched_tokens"] == row.max_num_batched_tokens, row.source
    assert report["memory"]["kv_cache_bytes"] == row.kv_cache_bytes, row.source
    assert report["num_blocks"] == blocks and report["vllm"]["num_cpu_blocks"] == row.num_cpu_blocks
    request_blocks = -(-length // 16)
    concurrency = blocks * 16 / length if report["vllm"]["engine"] == "V0" else blocks / request_blocks
    assert report["max_concurrency"] == pytest.approx(concurrency, abs=1e-4)
    tokens = int(concurrency * length) if row.tokens_from_concurrency else blocks * 16
    assert report["kv_cache_tokens"] == tokens
    assert result.exit_code == (0 if report["fits"] else 1)


def test_the_table_spans_v0_to_the_newest_release():
    engines = {
        json.loads(
            CliRunner()
            .invoke(app, ["plan", "--model", "llama3.1-8b", "--vllm-version", row.version, *row.args, "--json"])
            .stdout
        )["vllm"]["engine"]
        for row in ROWS
    }
    assert engines == {"V0", "V1"} and len({row.version for row in ROWS}) >= 5 and ROWS[-1].version == "0.33.0"
