"""Human-readable sizes: `8k` tokens, `23.5GiB` of memory (vLLM's argument syntax)."""

import re

from kvtool.errors import UsageError

GiB, MiB = 1 << 30, 1 << 20
# vLLM's human-readable ints (`--max-model-len 8k`, vLLM 0.10+): lower case is decimal (1k = 1000),
# upper case binary (1K = 1024).
_INT_SUFFIXES = {
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 1 << 10,
    "M": 1 << 20,
    "G": 1 << 30,
    "T": 1 << 40,
}
_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "t": 1 << 40,
}


def parse_human_int(text: str | int, what: str = "value") -> int:
    """`8192`, `8k` (8000), `8K` (8192), `25.6k` (25600); decimals only with decimal suffixes."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([kmgtKMGT]?)\s*", str(text))
    if not match or ("." in match[1] and match[2].isupper()):
        raise UsageError(f"{what} '{text}' is not a whole number.", "Use e.g. 8192, 8k (8000) or 8K (8192).")
    number = float(match[1]) * _INT_SUFFIXES.get(match[2], 1)
    if number != int(number):
        raise UsageError(f"{what} '{text}' is not a whole number of tokens.", "Use e.g. 8192, 8k (8000) or 8K (8192).")
    return int(number)


def parse_bytes(text: str | int | float, what: str = "size") -> int:
    """`23.58GiB`, `24GB`, `80G` (binary), or a plain number of bytes."""
    if isinstance(text, (int, float)):
        return int(text)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match[2].lower() if match else None
    if not match or unit not in _BYTE_UNITS:
        raise UsageError(f"{what} '{text}' is not a memory size.", "Use e.g. 23.58GiB, 24GB or 80G.")
    return int(float(match[1]) * _BYTE_UNITS[unit])


def format_gib(num_bytes: float) -> str:
    """vLLM's `format_gib`: round(bytes / GiB, 2), e.g. `4.0` or `12.35`."""
    return f"{round(num_bytes / GiB, 2)}"
