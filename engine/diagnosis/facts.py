"""Facts: every number a text states, with the quantity it measures, read from the words around it.

A fact is (quantity, value, unit, where it was read, how sure). It is read three ways, most sure first:
- `message`: a vLLM or PyTorch wording that names every number (wordings.py); its recogniser hands them over.
- `keyed`: a name right before it, in any layout people paste (keys.py); a flag and its value on two lines, a
  table's column header (layouts.py).
- `worded`: words of the quantity shortly before or after it, in several languages (worded.py, words.py), the unit
  choosing among the quantities that share words (GiB, %, ms or a count).

Names are vLLM's (quantities.py lists every alias).
"""

import re
from dataclasses import dataclass

from kvtool.engine.diagnosis.keys import keyed
from kvtool.engine.diagnosis.quantities import BY_NAME, SERVER_MAX_TOKENS
from kvtool.engine.diagnosis.samples import finished_requests
from kvtool.engine.diagnosis.values import convert
from kvtool.engine.diagnosis.worded import pairs, worded

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


FRAME = 'File "'  # a traceback's frame states no fact (its path and function hold the gate's words)
FACT_CHARS = 2048  # facts are read from a line's start: a longer line is data (token ids, base64), not settings
# the words that can start a quantity's name or words: a line whose shape holds none states no fact
GATE = re.compile(
    r"max|len|tok|util|block|seq|batch|size|usage|cache|running|waiting|pending|swapped|free|total|memory|"
    r"GiB|GB|MiB|\dG\b|%|ms\b|TPOT|TTFT|ITL|parallel|tp|pp|finish|reason|prompt|completion|concurren|preempt|context|"
    r"""weights|capacity|dtype|n_ctx|num_|predict|gen_toks|out_len|eager|chunked|estimated|clipped|pretrained|"""
    r"""model(?:_\w+|URL)?['"]?\s*[=:]|-model\b|"""
    r"priority|fraction|DCGM_FI_DEV_FB|"
    r"显存|上下文|长度|并发|缓存|利用率|截断|输出|抢占|コンテキスト|トークン|キャッシュ|同時|並列|メモリ|空き|"
    r"컨텍스트|토큰|캐시|동시|메모리|여유|контекст|токен|кэш|памят|свободн|одновременн|kontext|speicher|frei|"
    r"gleichzeitig|contexto|caché|memoria|memória|libre|dispon|concurr|concorr|ejecución|execução|espera",
    re.IGNORECASE,
)
# vLLM's line of the defaults a model's generation_config.json sets: its max_tokens caps every request (0.8 - 0.15)
SERVER_DEFAULTS = re.compile(r"default (?:chat |completion )?sampling params from model", re.IGNORECASE)

Template = tuple[tuple[str, str, tuple[int, int], str | None, Value | None], ...]


def template(shape: str) -> Template:
    """Where the facts of every line of this shape are: (quantity, how, span, unit, the value where the shape fixes
    it). The readers are digit-blind, so a line states the facts its shape (digits read as 0) does, at the same
    spans; only the values differ. Only a line's first FACT_CHARS characters are read."""
    shape = shape[:FACT_CHARS]
    if shape.startswith(FRAME) or not GATE.search(shape):
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


def read_line(text: str, index: int) -> list[Fact]:
    """Every fact `text` states by a key or by words, once each (a keyed reading wins over a worded one)."""
    facts: list[Fact] = []
    taken: list[tuple[int, int]] = []
    server = SERVER_DEFAULTS.search(text) is not None
    sources = (KEYED, finished_requests(text)), (KEYED, keyed(text)), (WORDED, pairs(text)), (WORDED, worded(text))
    for how, readings in sources:
        for name, value, unit, span in readings:
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            if server and name == "max_tokens":
                name = SERVER_MAX_TOKENS.name
            facts.append(Fact(name, value, unit, index, text, span, how))
            taken.append(span)
    return facts


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
        return max(found, key=lambda fact: (fact.value, fact.line)) if found else None  # the last of the largest
