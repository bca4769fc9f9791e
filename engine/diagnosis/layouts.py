"""Facts whose name and number are on different lines: a flag and its value one per line (a Ray or RL
trainer's argument list printed as a Python list, a Kubernetes manifest's `args:` items, a shell command
continued with `\\`), and a table whose column header names the quantity of every number under it (Markdown,
or comma- and tab-separated values)."""

import re

from kvtool.engine.diagnosis.facts import KEYED, Fact, Facts, convert, normal_key
from kvtool.engine.diagnosis.normalize import strip_prefix
from kvtool.engine.diagnosis.quantities import KEYS, WORDS, Quantity, kind_of

# a line that is only a flag (`--max-model-len`, `'--max-model-len',`, `- --max-model-len`, `- "--max-model-len"`)
LONE_FLAG = re.compile(r"""^[-\s]*['"]?(?P<flag>--[A-Za-z][\w-]*)['"]?,?\s*$""")
# a line that is only a value (`'32768',`, `- "8192"`, `0.95`)
LONE_VALUE = re.compile(r"""^[-\s]*['"]?(?P<value>-?[\w./:@-]+)['"]?,?\s*$""")
CELL_NUMBER = re.compile(r"^\s*(?P<number>-?\d+(?:,\d{3})*(?:\.\d+)?)\s*(?P<unit>%|ms|s|GiB|GB|MiB|x)?\s*$")
SEPARATORS = ("|", "\t", ",")
MAX_COLUMNS = 16


def spread_facts(lines: list[str]) -> Facts:
    """The facts a paste's physical lines (as pasted: prefixes and table bars kept) state across lines. Their line
    numbers are negative, in order: they come before every fact of a logical line, which is read later and wins."""
    layouts, facts = Layouts(), Facts()
    for index, line in enumerate(lines):
        facts += layouts.feed(line, index - len(lines))
    return facts


class Layouts:
    """Fed every physical line in order; gives the facts that span lines."""

    def __init__(self):
        self._flag: Quantity | None = None
        self._header: tuple[str, list[Quantity | None]] | None = None  # (separator, each column's quantity)

    def feed(self, line: str, index: int) -> list[Fact]:
        return self._piece(line, index, line)

    def _piece(self, piece: str, index: int, original: str) -> list[Fact]:
        flag, self._flag = self._flag, None
        content = strip_prefix(piece)[1] if "(" in piece or "[" in piece else piece  # a Ray worker's, a rank's
        if flag and (match := LONE_VALUE.match(content)):
            value = convert(flag, match.group("value"))
            if value is not None:
                return [Fact(flag.name, value, None, index, original, (0, 0), KEYED)]
        if match := LONE_FLAG.match(content):
            self._flag = KEYS.get(normal_key(match.group("flag")))
            return []
        return self._table_row(piece, index, original)

    def _table_row(self, piece: str, index: int, original: str) -> list[Fact]:
        separator = next((sep for sep in SEPARATORS if piece.count(sep) >= 2 or (sep == "|" and sep in piece)), None)
        if separator is None:
            self._header = None
            return []
        cells = [cell.strip() for cell in piece.strip().strip("|").split(separator)][:MAX_COLUMNS]
        if all(re.fullmatch(r":?-{2,}:?", cell) for cell in cells if cell):
            return []  # a Markdown table's rule under its header
        numbers = [CELL_NUMBER.match(cell) for cell in cells]
        header = self._header
        if not any(numbers):
            columns = [_column(cell) for cell in cells]
            self._header = (separator, columns) if any(columns) else None
            return []
        if header is None or header[0] != separator or len(header[1]) != len(cells):
            return []
        facts = []
        for quantity, number in zip(header[1], numbers):
            if quantity is None or number is None:
                continue
            value = convert(quantity, number.group("number"), number.group("unit"))
            if value is not None:
                facts.append(Fact(quantity.name, value, number.group("unit"), index, original, (0, 0), KEYED))
        return facts


def _column(cell: str) -> Quantity | None:
    """The quantity a column header names: a key (`max_model_len`), or words with a unit (`KV cache usage (%)`,
    `TPOT (ms)`)."""
    unit = re.search(r"\((%|ms|s|GiB|GB|MiB)\)|(%)$", cell)
    unit = unit and (unit.group(1) or unit.group(2))
    if quantity := KEYS.get(normal_key(re.sub(r"\s*\(.*", "", cell).replace(" ", "_"))):
        return quantity
    kinds = kind_of(unit)
    return next((quantity for quantity, words, _ in WORDS if quantity.kind in kinds and words.search(cell)), None)
