"""The GPUs a command runs on: `--gpu` / `--gpu-mem` / `--num-gpus` resolved, local devices read through
NVML (nvidia-ml-py)."""

from kvtool.engine.sizing.gpus import GpuInfo, GpuProcess, find_gpu
from kvtool.engine.sizing.units import GiB, parse_bytes
from kvtool.errors import UsageError


def resolve_gpus(
    gpu: str | None, gpu_mem: str | None, num_gpus: int | None, fallback: GpuInfo | None = None
) -> list[GpuInfo]:
    """`--gpu-mem 23.5GiB`, `--gpu H100-80GB`, `--gpu 0,1`, `--gpu local` (all local devices), or nothing.
    A comma list of names or sizes gives one GPU each, in rank order (pipeline stages of unequal GPUs).

    With nothing named and no local device, `fallback` stands in (or a one-line error says what to name).
    """
    if num_gpus is not None and num_gpus < 1:
        raise UsageError(f"--num-gpus must be at least 1, got {num_gpus}.", "Use e.g. --num-gpus 8.")
    if gpu_mem is not None:
        named = [find_gpu(name) for name in gpu.split(",")] if gpu and not _is_local(gpu) else []
        sizes = [_size(part) for part in gpu_mem.split(",")]
        return _repeat([_sized(size, named[i] if i < len(named) else None) for i, size in enumerate(sizes)], num_gpus)
    if gpu and not _is_local(gpu):
        return _repeat([find_gpu(name) for name in gpu.split(",")], num_gpus)
    local = read_local_gpus(_indices(gpu))
    if not local and gpu is None and fallback is not None:
        return [fallback] * (num_gpus or 1)
    if not local:
        raise UsageError(
            "no GPU found on this machine and none named.",
            "Name one with --gpu H100-80GB (see --list-gpus) or give its size with --gpu-mem 80GiB.",
        )
    return local[:num_gpus] if num_gpus else local


def _size(text: str) -> int:
    size = parse_bytes(text.strip(), "--gpu-mem")
    if size <= 0:
        raise UsageError(f"--gpu-mem must be positive, got {text}.", "Use e.g. --gpu-mem 24GiB.")
    return size


def _sized(size: int, named: GpuInfo | None) -> GpuInfo:
    name = named.name if named else f"{size / GiB:.2f} GiB GPU"
    return GpuInfo(name=name, total_bytes=size, source="size", arch=named.arch if named else None)


def _repeat(gpus: list[GpuInfo], num_gpus: int | None) -> list[GpuInfo]:
    """One GPU named stands for `num_gpus` of it; a list is the GPUs themselves."""
    return gpus * (num_gpus or 1) if len(gpus) == 1 else gpus


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
