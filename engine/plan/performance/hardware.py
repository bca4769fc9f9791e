"""A GPU's datasheet figures (memory bandwidth, dense tensor-core peaks, the link tensor parallelism
crosses), from the catalog's `datasheets` (`profiles/gpus.yaml`) or given outright."""

from dataclasses import dataclass, field, replace
from functools import lru_cache

from kvtool.engine.sizing.catalog import load_yaml
from kvtool.engine.sizing.gpus import GPU_CATALOG_FILE, find_gpu
from kvtool.errors import UsageError

GB = 1e9
TERA = 1e12
# Input dtypes of a GEMM, the catalog's keys: a dtype missing from a datasheet falls back to the next one
# that runs the same math (fp16 and bf16 share the tensor-core rate on every GPU that has both).
SAME_RATE = {"bf16": "fp16", "fp16": "bf16"}


@dataclass(frozen=True)
class GpuFigures:
    name: str
    hbm_gbps: float | None = None
    tflops: dict[str, float] = field(default_factory=dict)
    link: str = "pcie"  # nvlink | xgmi | pcie
    link_gbps: float = 0.0  # bidirectional, per GPU (xgmi: per point-to-point link)
    links: int = 0  # xgmi: links per GPU, one to each peer
    arch: str | None = None  # sm90, sm100, gfx942, ... (the catalog's)
    board_watts: float | None = None  # the board's power limit (TDP), where the datasheet gives it

    @property
    def blackwell(self) -> bool:
        return bool(self.arch) and self.arch.startswith("sm1") and len(self.arch) == 5

    def peak_flops(self, dtype: str) -> float | None:
        """Dense tensor-core FLOP/s for GEMM inputs of `dtype`, or None when the datasheet lacks it."""
        tflops = self.tflops.get(dtype) or self.tflops.get(SAME_RATE.get(dtype, ""))
        return tflops * TERA if tflops else None

    @property
    def hbm_bytes_per_s(self) -> float | None:
        return self.hbm_gbps * GB if self.hbm_gbps else None

    def link_bytes_per_s(self, tp: int) -> float:
        """One direction of what an all-reduce across `tp` GPUs can use: half the bidirectional figure;
        a full mesh (xgmi) uses only the links to the tp - 1 peers in the group."""
        if self.link == "xgmi":
            return min(tp - 1, self.links) * self.link_gbps * GB / 2
        return self.link_gbps * GB / 2


@lru_cache(maxsize=1)
def _datasheets() -> dict[str, dict]:
    return {str(name).lower(): row for name, row in (load_yaml(GPU_CATALOG_FILE).get("datasheets") or {}).items()}


def catalog_figures(name: str, given_as: str | None = None) -> GpuFigures:
    """The datasheet of a catalog GPU; `given_as` (the name the user typed) picks a board variant that shares
    the catalog row, such as a PCIe card listed under its SXM card's name. A device name as NVML reads it
    ("NVIDIA H100 80GB HBM3") finds its catalog row by its leading words."""
    sheets = _datasheets()
    for key in (*_spellings(given_as), *_spellings(name)):
        row = sheets.get(key) or sheets.get(_catalog_name(key))
        if row is not None:
            return GpuFigures(name=name, arch=_catalog_arch(name), **row)
    return GpuFigures(name=name, arch=_catalog_arch(name))


def _spellings(name: str | None) -> list[str]:
    """The name in the catalog's spelling, then without its trailing words: h100-80gb-hbm3, h100-80gb, h100."""
    if not name:
        return []
    words = name.strip().lower().replace(" ", "-").removeprefix("nvidia-").removeprefix("geforce-").split("-")
    return ["-".join(words[:count]) for count in range(len(words), 0, -1)]


def _catalog_arch(name: str) -> str | None:
    try:
        return find_gpu(name).arch
    except UsageError:
        return None


def _catalog_name(alias: str) -> str:
    try:
        return find_gpu(alias).name.lower()
    except UsageError:
        return ""


def with_given(figures: GpuFigures, bandwidth_gbps: float | None, tflops: dict[str, float] | None) -> GpuFigures:
    """`--gpu-bandwidth` / `--gpu-tflops` take the place of the datasheet's figures."""
    if bandwidth_gbps is not None:
        figures = replace(figures, hbm_gbps=bandwidth_gbps)
    if tflops:
        figures = replace(figures, tflops={**figures.tflops, **tflops})
    return figures


def parse_tflops(text: str | None, default_dtype: str) -> dict[str, float] | None:
    """`--gpu-tflops 312` (for the dtype the GEMMs run in) or `bf16=312,fp8=624`."""
    if text is None:
        return None
    try:
        pairs = [part.split("=") if "=" in part else (default_dtype, part) for part in text.split(",")]
        figures = {dtype.strip().lower(): float(value) for dtype, value in pairs}
        if not figures or min(figures.values()) <= 0:
            raise ValueError
    except ValueError:
        raise UsageError(
            f"--gpu-tflops '{text}' is not a positive TFLOP/s figure.",
            "Give the dense tensor-core peak, e.g. --gpu-tflops 312 or --gpu-tflops bf16=312,fp8=624.",
        ) from None
    return figures
