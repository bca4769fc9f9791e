"""Facts whose name and number are on different lines, or that a line states only as a row of its own (a process
nvidia-smi lists: the memory it holds): a flag and its value one per line (a Ray or RL
trainer's argument list printed as a Python list, a Kubernetes manifest's `args:` items, a shell command
continued with `\\`), and a table whose column header names the quantity of every number under it: Markdown,
comma-separated values (quoted cells too: a Grafana export) or tab-separated ones. A header may be a key, words
with a unit (`KV cache usage (%)`, `TPOT (ms)`, `used_memory [MiB]`) or a PromQL expression
(`rate(vllm:num_preemptions_total[1m])`, `histogram_quantile(0.99, vllm:time_to_first_token_seconds_bucket)`);
where the header gives no unit, the cells' own (`38%`) choose among the quantities its words name."""

import csv
import re
from functools import lru_cache

from kvtool.engine.diagnosis.facts import KEYED, Fact, Facts
from kvtool.engine.diagnosis.keys import normal_key, quantity_of
from kvtool.engine.diagnosis.normalize import strip_prefix
from kvtool.engine.diagnosis.quantities import BY_NAME, KEYS, PREEMPTIONS, Quantity, kind_of
from kvtool.engine.diagnosis.values import NUMBER, convert
from kvtool.engine.diagnosis.words import WORDS

# a line that is only a flag (`--max-model-len`, `'--max-model-len',`, `- --max-model-len`, `- "--max-model-len"`)
# a process row of nvidia-smi's table: GPU, GI, CI, PID, type, name, memory
SMI_PROCESS = re.compile(r"^(?:\|\s+)?\d+\s+(?:N/A|\d+)\s+(?:N/A|\d+)\s+\d+\s+[CG+]+\s+\S.*?\s(?P<mib>\d+)\s?MiB\s*\|$")
LONE_FLAG = re.compile(r"""^[-\s]*['"]?(?P<flag>--[A-Za-z][\w-]*)['"]?,?\s*$""")
# a line that is only a value (`'32768',`, `- "8192"`, `0.95`)
LONE_VALUE = re.compile(r"""^[-\s]*['"]?(?P<value>-?[\w./:@-]+)['"]?,?\s*$""")
CELL_NUMBER = re.compile(r"^\s*(?P<number>" + NUMBER + r")\s*(?P<unit>%|ms|s|GiB|GB|MiB|x|tokens)?\s*$")
HEADER_UNIT = re.compile(r"[(\[](%|ms|s|GiB|GB|MiB)[)\]]|(%)$")
WORD_CELL = re.compile(r"^[A-Za-z_]\w{0,31}$")
SEPARATORS = ("|", "\t", ",")
MAX_COLUMNS = 16
# PromQL: the metric names in an expression, and the functions that make a counter a rate
METRIC_NAME = re.compile(r"[A-Za-z_:][\w:]*")
RATE = re.compile(r"\b(?:i?rate|deriv)\(")


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
        self._header: tuple[str, list[str]] | None = None  # (separator, each column's header)

    def feed(self, line: str, index: int) -> list[Fact]:
        flag, self._flag = self._flag, None
        content = strip_prefix(line)[1] if "(" in line or "[" in line else line  # a Ray worker's, a rank's
        if flag and (match := LONE_VALUE.match(content)):
            value = convert(flag, match.group("value"))
            if value is not None:
                return [Fact(flag.name, value, None, index, line, (0, 0), KEYED)]
        if "MiB |" in line and (match := SMI_PROCESS.match(line.strip())):  # a row of its own, whatever joins lines
            value = convert(BY_NAME["process_gib"], match.group("mib"), "MiB")
            return [Fact("process_gib", value, "MiB", index, line, match.span("mib"), KEYED)]
        if match := LONE_FLAG.match(content):
            self._flag = KEYS.get(normal_key(match.group("flag")))
            return []
        return self._table_row(line, index)

    def _table_row(self, line: str, index: int) -> list[Fact]:
        separator = next((sep for sep in SEPARATORS if self._separates(line, sep)), None)
        if separator is None:
            self._header = None
            return []
        cells = _cells(line, separator)
        if all(re.fullmatch(r":?-{2,}:?", cell) for cell in cells if cell):
            return []  # a Markdown table's rule under its header
        numbers = [CELL_NUMBER.match(cell) for cell in cells]
        header = self._header
        if not any(numbers):
            named = any(column(cell, None) or column(cell, "%") for cell in cells)
            self._header = (separator, cells) if named else None
            return []
        if header is None or header[0] != separator or len(header[1]) != len(cells):
            return _row_keyed(cells, numbers, line, index)
        facts = []
        for name, number in zip(header[1], numbers):
            if number is None or (quantity := column(name, number.group("unit"))) is None:
                continue
            value = convert(quantity, number.group("number"), number.group("unit") or _header_unit(name))
            if value is not None:
                facts.append(Fact(quantity.name, value, number.group("unit"), index, line, (0, 0), KEYED))
        return facts + _words_under(header[1], cells, index, line)

    def _separates(self, line: str, separator: str) -> bool:
        """Whether `separator` splits this line into cells: two of it, a Markdown bar, or one that splits the rows
        under a header of two columns (or a machine's CSV, without spaces)."""
        if separator not in line:
            return False
        two_columns = (self._header is not None and self._header[0] == separator) or " " not in line.strip()
        return line.count(separator) >= 2 or separator == "|" or two_columns or _units_header(line, separator)


def _row_keyed(cells: list[str], numbers: list, line: str, index: int) -> list[Fact]:
    """A row whose first cell names the quantity of the numbers after it (a Grafana panel's query and its values
    before and under load): a fact for each."""
    if numbers[0] is not None or not any(numbers[1:]):
        return []
    facts = []
    for number in numbers[1:]:
        if number is not None and (quantity := column(cells[0], number.group("unit"))) is not None:
            value = convert(quantity, number.group("number"), number.group("unit") or _header_unit(cells[0]))
            if value is not None:
                facts.append(Fact(quantity.name, value, number.group("unit"), index, line, (0, 0), KEYED))
    return facts


def _words_under(headers: list[str], cells: list[str], index: int, line: str) -> list[Fact]:
    """The words a row states under a column of words (a request log's `finish_reason`: length, stop)."""
    facts = []
    for name, cell in zip(headers, cells):
        if WORD_CELL.match(cell) and (quantity := KEYS.get(normal_key(name))) is not None and quantity.kind == "str":
            facts.append(Fact(quantity.name, cell, None, index, line, (0, 0), KEYED))
    return facts


def _units_header(line: str, separator: str) -> bool:
    """A header of two columns, each a quantity with its unit (nvidia-smi's `memory.used [MiB], memory.total [MiB]`)."""
    return separator == "," and "[" in line and all(column(cell, None) for cell in _cells(line, separator))


def _cells(line: str, separator: str) -> list[str]:
    if separator == ",":
        cells = next(csv.reader([line.strip()], skipinitialspace=True), [])
    else:
        cells = line.strip().strip("|").split(separator)
    return [cell.strip() for cell in cells][:MAX_COLUMNS]


@lru_cache(maxsize=1024)
def column(header: str, unit: str | None) -> Quantity | None:
    """The quantity a column header names for a cell with this unit: a key or a PromQL expression
    (`max_model_len`, `vllm:num_requests_waiting{...}`), or words with a unit (`KV cache usage (%)`, `TPOT (ms)`)."""
    unit = _header_unit(header) or unit
    if quantity := _metric(header):
        return quantity
    key = re.sub(r"\s*[(\[].*", "", header).replace(" ", "_")
    if quantity := KEYS.get(key.replace(".", "_")) or KEYS.get(normal_key(key)):  # nvidia-smi's `memory.used`
        return quantity
    kinds = kind_of(unit)
    return next((quantity for quantity, words, _ in WORDS if quantity.kind in kinds and words.search(header)), None)


def _header_unit(header: str) -> str | None:
    found = HEADER_UNIT.search(header)
    if found:
        return found.group(1) or found.group(2)
    return "s" if "_seconds" in header else None  # a Prometheus histogram's


def _metric(header: str) -> Quantity | None:
    """The quantity of the last metric name in a PromQL expression (labels and ranges left out); the rate of the
    preemption counter is a rate of its own."""
    if ":" not in header and "(" not in header:
        return None
    bare = re.sub(r"\{[^{}]*\}|\[[^\]]*\]", "", header)
    for name in reversed(METRIC_NAME.findall(bare)):
        quantity, _ = quantity_of(name.rsplit(":", 1)[-1])
        if quantity is not None:
            rate = quantity is PREEMPTIONS and RATE.search(bare)
            return BY_NAME["preemptions_per_s"] if rate else quantity
    return None
