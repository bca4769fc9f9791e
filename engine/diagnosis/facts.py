"""Facts: every number a text states, with the quantity it measures, read from the words around it.

A fact is (quantity, value, unit, where it was read, how sure). It is read three ways, most sure first:
- `message`: a vLLM or PyTorch wording that names every number (wordings.py); its recogniser hands them over.
- `keyed`: a name right before it, in any layout people paste: `--max-model-len 4096`, `--max-model-len=4096`,
  `max_model_len=4096`, `"max_model_len": 4096`, `'--max-model-len', '4096'`, `max_model_len(4096)`,
  `max_model_len is 4096`, lm-eval's `max_model_length=4096,gpu_memory_utilisation=0.8`, a config path's last part
  (`rollout.max_num_batched_tokens=8192`), a stats line's `Running: 8 reqs`; a flag and its value on two lines
  (layouts.py), a table's column header (layouts.py).
- `worded`: words of the quantity shortly before or after it, in English or Chinese ("KV cache usage reached
  98%", "the context length is 8192", "only 16 tokens", "显存 24 GB", "上下文长度 32768"), the unit choosing among
  the quantities that share words (GiB, %, ms or a count).

Names are vLLM's (quantities.py lists every alias).
"""

import math
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from kvtool.engine.diagnosis.quantities import (
    BY_NAME,
    KEYS,
    MEMORY_AFTER,
    MEMORY_WORDS,
    WORDS,
    Quantity,
    Words,
    kind_of,
)

MESSAGE, KEYED, WORDED = "message", "keyed", "worded"
Value = int | float | str


@dataclass(frozen=True)
class Fact:
    quantity: str
    value: Value
    unit: str | None
    line: int  # the logical line it was read in
    evidence: str  # that line
    span: tuple[int, int]
    how: str  # MESSAGE | KEYED | WORDED


NUMBER = r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?"
_UNIT = r"\s?(?P<unit>GiB|MiB|KiB|GB|MB|TiB|bytes|%|ms|s\b|tokens?\b|reqs?\b|x\b)?"
KEY = re.compile(r"(?<![\w.-])(?P<key>(?:--?)?[A-Za-z_][\w.-]{0,60})")
# between a key and its value: `=`, `:`, a space after a flag, quotes and brackets, `(`, or a few linking words
_BETWEEN = (
    r"""['"]?\]?\s*(?:[:=]|：|\(|,\s*(?=['"])|\s+(?:(?:is |was )?set to|is|was|of|to|at|are|=)\s+|\s+)\s*"""
    r"""(?:already\s+|only\s+|about\s+|~)?['"\[]?"""
)
VALUE = re.compile(
    _BETWEEN + r"(?P<value>" + NUMBER + r"(?!\w|\.\d)|true\b|false\b|True\b|False\b|[A-Za-z][\w./:@-]{0,120})"
    r"\s?(?P<unit>GiB|MiB|KiB|GB|MB|TiB|bytes|%|ms|s\b|tokens?\b|reqs?\b|x\b)?"
)
NUMBER_WITH_UNIT = re.compile(r"(?<![\w.])(?P<number>" + NUMBER + r")" + _UNIT)
PAIR = re.compile(
    r"\(?(?P<a>" + NUMBER + r")\s*(?P<sep>[/,])\s*(?P<b>" + NUMBER + r")\s*(?P<unit>GiB|GB|MiB)\)?", re.IGNORECASE
)
_UNIT_CASE = {unit.lower(): unit for unit in ("GiB", "GB", "MiB")}
# the words before a pair, and what its two numbers are: `(free/total GiB)`, `(utilization, requested GiB)`
PAIR_WORDS = (
    (re.compile(r"free|available|可用|空闲", re.IGNORECASE), "/", ("free_gib", "total_gib")),
    (re.compile(r"utili[sz]ation|利用率", re.IGNORECASE), ",", ("gpu_memory_utilization", "requested_gib")),
)
_AFTER_FILLER = re.compile(r"\s*(?:is |are |of )?")
BEFORE, AFTER = 56, 28  # how far words may be from their number, in characters
FACT_CHARS = 2048  # facts are read from a line's start: a longer line is data (token ids, base64), not settings
_IN_GIB = {"GiB": 1.0, "GB": 1.0, "MiB": 1 / 1024, "MB": 1 / 1024, "KiB": 1 / (1 << 20), "TiB": 1024.0}
_IN_GIB["bytes"] = 1 / (1 << 30)
# the words that can start a quantity's name or words: a line whose shape holds none states no fact
GATE = re.compile(
    r"max|len|tok|util|block|seq|batch|size|usage|cache|running|waiting|pending|swapped|free|total|memory|"
    r"GiB|GB|MiB|%|ms\b|TPOT|TTFT|ITL|parallel|tp|pp|finish|reason|prompt|completion|concurren|preempt|context|"
    r"weights|capacity|dtype|n_ctx|num_|predict|gen_toks|eager|chunked|显存|上下文|长度|并发|缓存|利用率|截断|输出",
    re.IGNORECASE,
)


Template = tuple[tuple[str, str, tuple[int, int], str | None, Value | None], ...]


def template(shape: str) -> Template:
    """Where the facts of every line of this shape are: (quantity, how, span, unit, the value where the shape fixes
    it). The readers are digit-blind, so a line states the facts its shape (digits read as 0) does, at the same
    spans; only the values differ. Only a line's first FACT_CHARS characters are read."""
    shape = shape[:FACT_CHARS]
    if not GATE.search(shape):
        return ()
    return tuple(
        (fact.quantity, fact.how, fact.span, fact.unit, fact.value if _fixed(fact) else None)
        for fact in read_line(shape, 0)
    )


def _fixed(fact: Fact) -> bool:
    """Whether every line of the fact's shape states the same value: a bare switch, a count of ids."""
    return isinstance(fact.value, bool) or fact.unit == "ids"


def from_template(found: Template, text: str, index: int) -> list[Fact]:
    """The facts of a line of a shape whose template is `found`."""
    facts = []
    for name, how, (start, end), unit, fixed in found:
        value = fixed if fixed is not None else convert(BY_NAME[name], text[start:end], unit)
        if value is not None:
            facts.append(Fact(name, value, unit, index, text, (start, end), how))
    return facts


def normal_key(key: str) -> str:
    """`--max-model-len`, `max-model-len`, `rollout.max_model_len`, `maxModelLen`: `max_model_len`."""
    key = key.lstrip("-").rsplit(".", 1)[-1]
    if not key.islower():
        key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)
    return key.replace("-", "_").lower()


# a list of token ids, which counts tokens: LLM.generate's RequestOutput, a request log
TOKEN_IDS = re.compile(r"\b(?P<key>prompt_token_ids|token_ids|output_ids)\s*[=:]\s*[\[(](?P<items>[\d,\s]*\d)[\])]")
COUNTED = {"prompt_token_ids": "prompt_tokens", "token_ids": "completion_tokens", "output_ids": "completion_tokens"}
# a switch given bare: `--enforce-eager`, `--no-enable-chunked-prefill`
BARE_SWITCH = re.compile(r"(?<![\w-])--(?P<no>no-)?(?P<key>enforce-eager|enable-chunked-prefill)(?![\w-])(?!\s*=)")


def read_line(text: str, index: int) -> list[Fact]:
    """Every fact `text` states by a key or by words, once each (a keyed reading wins over a worded one)."""
    facts, taken = [], []
    if "--" in text:
        for match in BARE_SWITCH.finditer(text):
            name = normal_key(match.group("key"))
            facts.append(Fact(name, not match.group("no"), None, index, text, match.span(), KEYED))
    if "_ids" in text:
        for match in TOKEN_IDS.finditer(text):
            count = match.group("items").count(",") + 1
            facts.append(Fact(COUNTED[match.group("key")], count, "ids", index, text, match.span("items"), KEYED))
            taken.append(match.span())
    for fact in _keyed(text, index):
        if not _overlaps(fact.span, taken):
            facts.append(fact)
            taken.append(fact.span)
    for fact in _pairs(text, index):
        if not _overlaps(fact.span, taken):
            facts.append(fact)
            taken.append(fact.span)
    for fact in _worded(text, index):
        if not _overlaps(fact.span, taken):
            facts.append(fact)
    return facts


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


def _keyed(text: str, index: int) -> Iterator[Fact]:
    for key in KEY.finditer(text):
        name = key.group("key").rstrip(".-")
        if (quantity := KEYS.get(normal_key(name))) is None:
            continue
        if (match := VALUE.match(text, key.start() + len(name))) is None:
            continue
        between = text[key.start() + len(name) : match.start("value")]
        if quantity.kind in ("str", "bool") and not (re.search("[-_]", name) or re.search("[=:]", between)):
            continue  # a name or a switch only where a flag or a key states it, not after a word of prose
        value = convert(quantity, match.group("value"), match.group("unit"))
        if value is not None:
            yield Fact(quantity.name, value, match.group("unit") or None, index, text, match.span("value"), KEYED)


def convert(quantity: Quantity, text: str, unit: str | None = None) -> Value | None:
    """The value of `text` as `quantity` holds it (GiB, a percent, a count, a flag or a name); None where it is
    not one (a word for a number, a unit of another kind)."""
    kind = quantity.kind
    if kind == "str":
        return None if text.lower() in ("none", "null", "auto") and quantity.name != "kv_cache_dtype" else text
    if kind == "bool":
        return {"true": True, "false": False}.get(text.lower())
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return None
    if not math.isfinite(number) or abs(number) > 1e15:
        return None
    if kind == "gib":
        if unit not in _IN_GIB and unit is not None:
            return None
        return round(number * _IN_GIB.get(unit or "GiB", 1.0), 4)
    if kind == "percent":
        return round(number * 100 if number <= 1 and unit != "%" else number, 4)
    if kind == "fraction":
        return round(number / 100 if unit == "%" or number > 1 else number, 4)
    if kind == "ms":
        return round(number * 1000 if unit == "s" else number, 3)
    return int(number) if number == int(number) and kind == "int" else (number if kind == "float" else None)


def _pairs(text: str, index: int) -> Iterator[Fact]:
    """`(free/total GiB)` after words of free memory and `(utilization, requested GiB)` after words of
    utilization: vLLM's way (and people's) to give two numbers at once."""
    for match in PAIR.finditer(text):
        before = text[max(0, match.start() - BEFORE) : match.start()]
        found = [(words.search(before), names) for words, sep, names in PAIR_WORDS if sep == match.group("sep")]
        names = next((names for words, names in found if words), None)
        if names is None:
            continue
        unit = _UNIT_CASE[match.group("unit").lower()]
        for name, group in zip(names, "ab"):
            own = unit if name.endswith("_gib") else None
            if (value := convert(BY_NAME[name], match.group(group), own)) is not None:
                yield Fact(name, value, own, index, text, match.span(group), WORDED)


def _worded(text: str, index: int) -> Iterator[Fact]:
    ends: dict[bool, list] = {}  # for sizes and for the rest: each quantity's words, where they end in the line
    lower = text.lower()
    for match in NUMBER_WITH_UNIT.finditer(text):
        unit = match.group("unit")
        kinds = kind_of(unit)
        memory = "gib" in kinds
        if memory not in ends:
            ends[memory] = [
                (q, words, [m.end() for m in words.finditer(text)])
                for q, words, gates in _words_of(memory)
                if any(gate in lower for gate in gates)
            ]
        quantity = _named_by_words(text, match.start(), match.end(), kinds, ends[memory])
        if quantity is None:
            continue
        value = convert(quantity, match.group("number"), unit)
        if value is not None:
            yield Fact(quantity.name, value, unit, index, text, match.span("number"), WORDED)


def _words_of(memory: bool) -> Words:
    return MEMORY_WORDS if memory else WORDS


def _named_by_words(text: str, start: int, end: int, kinds: tuple[str, ...], ends: list) -> Quantity | None:
    """The quantity whose words end closest before the number, within BEFORE characters (or start right after
    it), among those of the number's kind. `ends`: each quantity's words and where they end in the line."""
    best, distance = None, BEFORE + AFTER
    filler = _AFTER_FILLER.match(text, end).end()
    for quantity, words, word_ends in ends:
        if quantity.kind not in kinds:
            continue
        before = bisect_right(word_ends, start) - 1
        if before >= 0 and (gap := start - word_ends[before]) <= BEFORE and gap < distance:
            best, distance = quantity, gap
        after_words = MEMORY_AFTER.get(quantity.name) if "gib" in kinds else words
        if after_words and after_words.match(text, filler, end + AFTER) and filler - end < distance:
            best, distance = quantity, filler - end
    return best


class Facts(list):
    """Every fact of a text, in the order read, indexed by quantity."""

    def __init__(self, facts=()):
        super().__init__()
        self._by: dict[str, list[Fact]] = {}
        self += facts

    def __iadd__(self, facts):
        for fact in facts:
            self.append(fact)
            self._by.setdefault(fact.quantity, []).append(fact)
        return self

    def of(self, quantity: str, how: tuple[str, ...] = (MESSAGE, KEYED, WORDED)) -> list[Fact]:
        return [fact for fact in self._by.get(quantity, ()) if fact.how in how]

    def setting(self, quantity: str) -> Fact | None:
        """What the text states as a setting: the first of the last line that states it by a key, else by words
        (a line's later mentions are comments on the first: "4096 (equivalent to ...)")."""
        for how in (KEYED, WORDED):
            found = self.of(quantity, (how,))
            if found:
                last = found[-1].line
                return next(fact for fact in found if fact.line == last)
        return None

    def in_lines(self, first: int, last: int) -> list[Fact]:
        return [fact for fact in self if first <= fact.line <= last]

    def largest(self, quantity: str) -> Fact | None:
        found = [fact for fact in self.of(quantity) if isinstance(fact.value, (int, float))]
        return max(found, key=lambda fact: fact.value) if found else None
