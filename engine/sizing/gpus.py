"""GPU facts: live readings through NVML (nvidia-ml-py), the GPU catalog, or a size the user gives."""

import difflib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from kvtool.engine.sizing.units import GiB, parse_bytes
from kvtool.errors import UsageError

GPU_CATALOG_FILE = Path(__file__).resolve().parents[2] / "profiles" / "gpus.yaml"


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
    source: str = "catalog"  # "nvml" | "catalog" | "size"
    arch: str | None = None  # sm90 (compute capability 9.0), gfx942, ...

    @property
    def compute_capability(self) -> float | None:
        digits = self.arch[2:] if self.arch and self.arch.startswith("sm") else ""
        return int(digits[:-1]) + int(digits[-1]) / 10 if digits.isdigit() and len(digits) >= 2 else None


def resolve_gpus(
    gpu: str | None, gpu_mem: str | None, num_gpus: int | None, fallback: GpuInfo | None = None
) -> list[GpuInfo]:
    """`--gpu-mem 23.5GiB`, `--gpu H100-80GB`, `--gpu 0,1`, `--gpu local` (all local devices), or nothing.

    With nothing named and no local device, `fallback` stands in (or a one-line error says what to name).
    """
    if num_gpus is not None and num_gpus < 1:
        raise UsageError(f"--num-gpus must be at least 1, got {num_gpus}.", "Use e.g. --num-gpus 8.")
    if gpu_mem is not None:
        size = parse_bytes(gpu_mem, "--gpu-mem")
        if size <= 0:
            raise UsageError(f"--gpu-mem must be positive, got {gpu_mem}.", "Use e.g. --gpu-mem 24GiB.")
        named = find_gpu(gpu) if gpu and not _is_local(gpu) else None
        name = named.name if named else f"{size / GiB:.2f} GiB GPU"
        arch = named.arch if named else None
        return [GpuInfo(name=name, total_bytes=size, source="size", arch=arch)] * (num_gpus or 1)
    if gpu and not _is_local(gpu):
        return [find_gpu(gpu)] * (num_gpus or 1)
    local = read_local_gpus(_indices(gpu))
    if not local and gpu is None and fallback is not None:
        return [fallback] * (num_gpus or 1)
    if not local:
        raise UsageError(
            "no GPU found on this machine and none named.",
            "Name one with --gpu H100-80GB (see --list-gpus) or give its size with --gpu-mem 80GiB.",
        )
    return local[:num_gpus] if num_gpus else local


def _is_local(gpu: str) -> bool:
    return gpu.strip().lower() in ("local", "all") or all(part.strip().isdigit() for part in gpu.split(","))


def _indices(gpu: str | None) -> list[int] | None:
    if gpu is None or gpu.strip().lower() in ("local", "all"):
        return None
    return [int(part) for part in gpu.split(",")]


def read_local_gpus(indices: list[int] | None = None) -> list[GpuInfo]:
    """One reading per device through NVML; [] when there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no device: the caller explains what to do
        return []
    try:
        count = pynvml.nvmlDeviceGetCount()
        for index in indices or []:
            if not 0 <= index < count:
                raise UsageError(f"GPU {index} does not exist; this machine has {count}.", f"Use --gpu 0..{count - 1}.")
        return [_read_device(pynvml, index) for index in (indices or range(count))]
    finally:
        pynvml.nvmlShutdown()


def _read_device(pynvml, index: int) -> GpuInfo:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    try:  # v2 memory info counts reserved memory as used
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    except Exception:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    name = pynvml.nvmlDeviceGetName(handle)
    return GpuInfo(
        name=name.decode() if isinstance(name, bytes) else name,
        total_bytes=int(memory.total),
        free_bytes=int(memory.free),
        used_bytes=int(memory.used),
        index=index,
        processes=_processes(pynvml, handle),
        mig_mode=_mig_mode(pynvml, handle),
        source="nvml",
        arch=_arch(pynvml, handle),
    )


def _arch(pynvml, handle) -> str | None:
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    except Exception:
        return None
    return f"sm{major}{minor}"


def _processes(pynvml, handle) -> tuple[GpuProcess, ...]:
    try:
        found = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return ()
    return tuple(GpuProcess(pid=int(p.pid), used_bytes=int(p.usedGpuMemory or 0)) for p in found)


def _mig_mode(pynvml, handle) -> bool | None:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except Exception:
        return None
    return bool(current)


@lru_cache(maxsize=1)
def _catalog_rows() -> tuple[dict, ...]:
    from kvtool.engine.sizing.catalog import load_yaml

    return tuple(load_yaml(GPU_CATALOG_FILE)["gpus"])


def gpu_catalog() -> tuple[GpuInfo, ...]:
    return tuple(
        GpuInfo(name=row["name"], total_bytes=int(row["memory_gib"] * GiB), arch=row.get("arch"))
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
