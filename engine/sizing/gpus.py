"""GPU facts: the GpuInfo a plan sizes for, and the GPU catalog (`profiles/gpus.yaml`)."""

import difflib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from kvtool.engine.sizing.catalog import load_yaml
from kvtool.engine.sizing.units import GiB
from kvtool.errors import UsageError

GPU_CATALOG_FILE = Path(__file__).resolve().parents[2] / "profiles" / "gpus.yaml"
# Shared memory one thread block may opt into, by compute capability (cudaDevAttrMaxSharedMemoryPerBlockOptin,
# CUDA C Programming Guide, "Technical Specifications per Compute Capability").
SHARED_MEMORY_PER_BLOCK = {7.0: 98304, 7.5: 65536, 8.0: 166912, 8.6: 101376, 8.7: 166912, 8.9: 101376, 9.0: 232448}


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int


@dataclass(frozen=True)
class GpuInfo:
    name: str
    total_bytes: int
    free_bytes: int | None = None
    used_bytes: int | None = None
    index: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    mig_mode: bool | None = None
    source: str = "catalog"  # "nvml" | "catalog" | "size" | "kv-cache-memory"
    arch: str | None = None  # sm90 (compute capability 9.0), gfx942, ...
    nvswitch: bool = False  # an NVSwitch (HGX) board: NCCL adds NVLink SHARP buffers at tp > 1

    @property
    def compute_capability(self) -> float | None:
        digits = self.arch[2:] if self.arch and self.arch.startswith("sm") else ""
        return int(digits[:-1]) + int(digits[-1]) / 10 if digits.isdigit() and len(digits) >= 2 else None

    @property
    def shared_memory_per_block(self) -> int | None:
        return SHARED_MEMORY_PER_BLOCK.get(self.compute_capability)


@lru_cache(maxsize=1)
def _catalog_rows() -> tuple[dict, ...]:
    return tuple(load_yaml(GPU_CATALOG_FILE)["gpus"])


def gpu_catalog() -> tuple[GpuInfo, ...]:
    return tuple(
        GpuInfo(
            name=row["name"],
            total_bytes=int(row["memory_gib"] * GiB),
            arch=row.get("arch"),
            nvswitch=row.get("nvswitch", False),
        )
        for row in _catalog_rows()
    )


def with_free_memory(gpus: list[GpuInfo], free: int | None) -> list[GpuInfo]:
    """`--gpu-free`: what other processes leave free on each GPU (NVML's reading otherwise)."""
    if free is None:
        return gpus
    if not 0 < free <= min(g.total_bytes for g in gpus):
        raise UsageError(
            f"--gpu-free must be positive and at most the GPU's memory, got {free / GiB:.2f} GiB.",
            "Give the free memory nvidia-smi shows, e.g. --gpu-free 60GiB.",
        )
    return [replace(g, free_bytes=free, used_bytes=g.total_bytes - free) for g in gpus]


@lru_cache(maxsize=1)
def _gpu_index() -> dict[str, str]:
    return {
        str(name).lower(): row["name"] for row in _catalog_rows() for name in (row["name"], *row.get("aliases", ()))
    }


def find_gpu(name: str) -> GpuInfo:
    key = name.strip().lower().replace(" ", "-").removeprefix("nvidia-")
    canonical = _gpu_index().get(key)
    if canonical is None:
        close = difflib.get_close_matches(key, _gpu_index(), n=3, cutoff=0.5)
        hint = f"Did you mean {', '.join(dict.fromkeys(_gpu_index()[c] for c in close))}? " if close else ""
        raise UsageError(f"unknown GPU '{name}'.", f"{hint}See --list-gpus, or give the size with --gpu-mem 80GiB.")
    return next(gpu for gpu in gpu_catalog() if gpu.name == canonical)


def catalog_matches(total_bytes: int, tolerance: float = 0.0075) -> list[GpuInfo]:
    """Catalog GPUs whose memory is `total_bytes` within `tolerance` (a size given without a name)."""
    return [gpu for gpu in gpu_catalog() if abs(gpu.total_bytes - total_bytes) <= tolerance * total_bytes]
