"""A number as a quantity holds it: its unit (GiB, a percent, ms or s, tokens) and a thousands suffix ("16k", "32K",
"1M") taken into account, or None where the text is not one (a word for a number, a unit of another kind)."""

import math
import re

from kvtool.engine.diagnosis.quantities import Quantity

MAX_NUMBER = 1e15  # no count, size or rate in a log comes near it: a longer number is no quantity

# a number, with a thousands suffix where one follows it ("16k", "32K tokens", "1M context"; not "KiB", "MB"), or
# the ten thousands of Chinese, Japanese and Korean ("1万", "1.2萬", "3만")
NUMBER = r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?(?:[kKM](?![A-Za-z])|[万萬만])?"
UNITS = r"GiB|MiB|KiB|GB|MB|TiB|G(?=\s*(?:VRAM|显存|memory|RAM)|\b)|bytes|%|ms|s\b|tokens?\b|reqs?\b|x\b"
IN_GIB = {"GiB": 1.0, "GB": 1.0, "G": 1.0, "MiB": 1 / 1024, "MB": 1 / 1024, "KiB": 1 / (1 << 20), "TiB": 1024.0}
IN_GIB["bytes"] = 1 / (1 << 30)
_SUFFIX = re.compile(r"([kKM])$")
MYRIAD = re.compile(r"[万萬만]$")


def convert(quantity: Quantity, text: str, unit: str | None = None) -> int | float | str | bool | None:
    """The value of `text` as `quantity` holds it (GiB, a percent, a count, a flag or a name)."""
    kind = quantity.kind
    if kind == "str":
        return None if text.lower() in ("none", "null", "auto") and quantity.name != "kv_cache_dtype" else text
    if kind == "bool":
        return {"true": True, "false": False}.get(text.lower())
    number = to_number(text)
    if number is None:
        return None
    if kind == "gib":
        if unit not in IN_GIB and unit is not None:
            return None
        return round(number * IN_GIB.get(unit or "GiB", 1.0), 4)
    if kind == "percent":
        return round(number * 100 if number <= 1 and unit != "%" else number, 4)
    if kind == "fraction":
        return round(number / 100 if unit == "%" or number > 1 else number, 4)
    if kind == "ms":
        return round(number * 1000 if unit == "s" else number, 3)
    return int(number) if number == int(number) and kind == "int" else (number if kind == "float" else None)


def to_number(text: str) -> float | None:
    """`4,096`, `0.9`, `1e5`; `32K` is 32 x 1024 (vLLM's reading too), `16k` as people mean it: 16 x 1024 where 16 is
    a power of two (16k, 32k, 128k contexts), else x 1000 (`6k`, `1.5k`); `1M` likewise with 1024 x 1024; `1万` is
    10,000."""
    suffix = _SUFFIX.search(text)
    myriad = MYRIAD.search(text)
    digits = text[:-1] if suffix or myriad else text
    try:
        number = float(digits.replace(",", ""))
    except ValueError:
        return None
    if not math.isfinite(number) or abs(number) > MAX_NUMBER:
        return None
    if myriad:
        number *= 10_000
    elif suffix and suffix.group(1) != "M" and (power := _truncated_power(number)):
        number = float(power)  # `131k`, `262k`: a power-of-two context told by its first digits (131072, 262144)
    elif suffix:
        binary = suffix.group(1) == "K" or (number.is_integer() and number > 0 and int(number) & int(number - 1) == 0)
        number *= (1024 if binary else 1000) ** (2 if suffix.group(1) == "M" else 1)
    if not math.isfinite(number) or abs(number) > MAX_NUMBER:
        return None
    return number


def _truncated_power(number: float) -> int | None:
    """The power of two of at least 2**16 whose thousands `number` is (131 for 131072), else None."""
    power = 1 << max(16, int(number * 1000).bit_length())
    return power if number.is_integer() and power // 1000 == number else None
