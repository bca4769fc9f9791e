"""Compiles the C kernels in `kernels/cpu/` once per machine and loads them through ctypes.

The library is built with the system C compiler for this very CPU (`-march=native`) and cached
under $KVTOOL_CACHE_DIR/kernels (default ~/.cache/kvtool/kernels), keyed by the sources, the flags,
the compiler and the CPU's feature flags. Without a compiler, or with KVTOOL_CPU_KERNELS=0, there is
no library and the torch references do the work. KVTOOL_CPU_MARCH names another -march (x86-64-v3: the
AVX2 class's paths on a CPU with AVX-512 and AMX); one that turns on an instruction set of MARCH_FEATURES
this CPU lacks is refused.
"""

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kvtool.cache import cache_dir

logger = logging.getLogger("kvtool.kernels")

_ptr, _i64, _i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
# The exported functions and their C argument types (see the .c files); all return void but those in RETURNS.
SIGNATURES = {
    "kvtool_paged_decode": [_ptr],
    "kvtool_rms_norm": [_ptr] * 5 + [_i64, _i64, ctypes.c_float, _i32, _i32],
    "kvtool_silu_and_mul": [_ptr, _ptr, _i64, _i64, _i32, _i32],
    "kvtool_rotary": [_ptr, _ptr, _i64, _ptr, _i64, _ptr, _ptr, _ptr, _i64, _i64, _i64, _i64, _i32, _i32],
    "kvtool_small_linear": [_ptr] * 4 + [_i64, _i64, _i64, _i32, _i32],
    "kvtool_small_linear_vectorized": [],
    "kvtool_panel_linear": [_ptr] * 4 + [_i64, _i64, _i64, _i32, _i32],
    "kvtool_panel_linear_vectorized": [],
    "kvtool_quant_panel_linear": [_ptr, _ptr, _i64, _i64, _i64, _ptr, _ptr, _ptr, _i32, _i32],
    "kvtool_quant_panel_linear_vectorized": [],
    "kvtool_store_kv": [_ptr, _ptr, _i64, _i64, _ptr, _ptr, _ptr, _i64, _i64, _i32, _i32],
    "kvtool_decode_step": [_ptr],
    "kvtool_amx_linear": [_ptr] * 4 + [_i64, _i64, _i64, _i32],
    "kvtool_amx_linear_built": [],
    "kvtool_quant_amx_linear": [_ptr, _ptr, _i64, _i64, _i64, _ptr, _ptr, _ptr, _i32, _i32],
    "kvtool_quant_amx_linear_built": [],
    "kvtool_flush_denormals": [_i32],
}
RETURNS = {
    name: _i32
    for name in (
        "kvtool_small_linear_vectorized",
        "kvtool_panel_linear_vectorized",
        "kvtool_quant_panel_linear_vectorized",
        "kvtool_panel_linear",
        "kvtool_quant_panel_linear",
        "kvtool_decode_step",
        "kvtool_amx_linear",
        "kvtool_amx_linear_built",
        "kvtool_quant_amx_linear",
        "kvtool_quant_amx_linear_built",
    )
}

SOURCE_DIR = Path(__file__).parent / "cpu"
SOURCES = (
    "paged_decode.c",
    "fused_ops.c",
    "small_linear.c",
    "panel_linear.c",
    "quant_panel_linear.c",
    "store_kv.c",
    "decode_step.c",
    "denormals.c",
    "amx_linear.c",
    "quant_amx_linear.c",
)
# Reassociation lets the compiler vectorize reductions; unlike -ffast-math it keeps inf and NaN
# semantics and does not switch the process to flush-to-zero.
FLAGS = [
    "-O3",
    "-fno-math-errno",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
    "-fopenmp",
    "-shared",
    "-fPIC",
]


# An instruction set's macro as the compiler defines it for a -march, and its name in /proc/cpuinfo
MARCH_FEATURES = {
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__AVXVNNI__": "avx_vnni",
    "__AVX512F__": "avx512f",
    "__AVX512BW__": "avx512bw",
    "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16",
    "__AMX_TILE__": "amx_tile",
    "__AMX_INT8__": "amx_int8",
    "__AMX_BF16__": "amx_bf16",
}


class MarchBeyondCpu(OSError):
    """KVTOOL_CPU_MARCH names instructions this CPU lacks: the library would die of an illegal instruction."""


def cpu_march() -> str:
    """The -march the kernels are built for: KVTOOL_CPU_MARCH, else this CPU's own instruction sets."""
    return os.environ.get("KVTOOL_CPU_MARCH") or "native"


def cpu_kernels_enabled() -> bool:
    """KVTOOL_CPU_KERNELS=0 keeps the CPU path on plain torch (the references, unpacked weights)."""
    return os.environ.get("KVTOOL_CPU_KERNELS", "1") != "0"


def load_library() -> ctypes.CDLL | None:
    """The compiled kernels, or None when they are turned off or cannot be built."""
    return compiled_library() if cpu_kernels_enabled() else None


@functools.cache
def compiled_library() -> ctypes.CDLL | None:
    """The compiled kernels whatever KVTOOL_CPU_KERNELS says (the ops' own lookup), or None."""
    compiler = c_compiler()
    if compiler is None:
        logger.info("no C compiler found; CPU attention runs on the torch reference")
        return None
    try:
        library = ctypes.CDLL(str(build_library(compiler, cache_dir() / "kernels")))
    except (OSError, subprocess.SubprocessError) as error:
        logger.warning("CPU kernels unavailable (%s); the torch references run instead", _first_line(error))
        return None
    return with_signatures(library)


def with_signatures(library: ctypes.CDLL) -> ctypes.CDLL:
    """`library` with the argument and return types of every exported function set."""
    for name, argtypes in SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, RETURNS.get(name)
    return library


def c_compiler() -> str | None:
    """$CC, else the system's cc or gcc."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build_library(compiler: str, folder: Path, extra_flags: tuple[str, ...] = ()) -> Path:
    """The shared library for this machine in `folder`, compiled unless an identical build is there.
    `extra_flags` (tests) can take instruction sets away, e.g. -mno-avx512f for the portable loops."""
    flags = [*FLAGS, f"-march={cpu_march()}", *extra_flags]
    target = folder / f"kvtool_cpu-{_build_key(compiler, flags)}.so"
    if not target.exists():
        _check_march(compiler)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            built = Path(scratch) / target.name
            sources = [str(SOURCE_DIR / name) for name in SOURCES]
            subprocess.run(
                [compiler, *flags, *sources, "-o", str(built), "-lm"],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
            os.replace(built, target)  # atomic: a concurrent start sees no half-written file
    return target


def _check_march(compiler: str) -> None:
    """Raises MarchBeyondCpu where KVTOOL_CPU_MARCH lets the compiler use instructions this CPU lacks."""
    if cpu_march() == "native":
        return
    missing = sorted(name for name in march_features(compiler, cpu_march()) if name not in cpu_flags())
    if missing:
        raise MarchBeyondCpu(
            f"KVTOOL_CPU_MARCH={cpu_march()} uses {', '.join(missing)}, which this CPU lacks: "
            "unset it, or name a target this CPU runs, such as x86-64-v3"
        )


def march_features(compiler: str, march: str) -> set[str]:
    """The instruction sets of MARCH_FEATURES that `-march=march` lets the compiler use."""
    command = [compiler, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull]
    macros = subprocess.run(command, check=True, capture_output=True, text=True, timeout=30).stdout
    defined = {line.split()[1] for line in macros.splitlines() if line.startswith("#define ")}
    return {name for macro, name in MARCH_FEATURES.items() if macro in defined}


def _build_key(compiler: str, flags: list[str]) -> str:
    digest = hashlib.sha256()
    for source in sorted(SOURCE_DIR.iterdir()):
        digest.update(source.name.encode() + source.read_bytes())
    digest.update(" ".join([compiler, *flags, _compiler_version(compiler), _cpu_flags_line()]).encode())
    return digest.hexdigest()[:16]


def _compiler_version(compiler: str) -> str:
    return subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature names, as /proc/cpuinfo gives them (e.g. "avx2", "amx_tile")."""
    return frozenset(_cpu_flags_line().partition(":")[2].split())


def _cpu_flags_line() -> str:
    """The CPU's feature list: a library built with -march=native must not run on another CPU."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line for line in lines if line.startswith(("flags", "Features"))), "")


def _first_line(error: Exception) -> str:
    text = getattr(error, "stderr", None) or str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__
