"""`kvtool diagnose`: failure text in, cause and computed fixes out. Facts first, then rules.

reader     -> only the stretches that can matter (anchors), cleaned (streamed, bounded memory; widening: the
              stretches around a chunk's hits, merged, and whether they keep every line; unwrap: hard
              wraps and double spacing undone); an input of at most 1 MiB is a paste, read whole
layouts    -> in a paste, the facts spread over lines (a flag and its value one per line, a table's columns)
normalize  -> logical lines: prefixes stripped, escapes undone, lost line breaks restored, wrapped
              lines joined, typographic quotes read as ASCII
scanner    -> per line, as planned once per shape (plan, shapes): the facts it states (facts: every number with
              the quantity it measures, by a key (keys) or by the words around it (worded, words); quantities: their
              names; values: units), what vLLM's known wordings find in it (recognisers: derived from wordings by
              patterns, read around elisions by elided, plus truncation's trackers of absent max_tokens), what it
              says in words (signs), the log's context (its settings from the facts and the start-up reader) and
              the stage of an OOM (stage)
explain    -> the causes: the wordings' observations, then rules over the facts where no wording named one
              (rules; caps: where an answer's cap came from, clients: the caps clients set), failures the start-up
              figures imply (explain, launch_check: plan's memory model where the error is cut off); findings with
              numbers read and computed (through kvtool.engine.sizing.kv_cache), the settings they are sized on
              (settings), fixes and the other causes the text allows (explain_*: length, budget, start-up, graphs,
              runtime, pressure, truncation, config)
"""

from typing import BinaryIO

from kvtool.engine.diagnosis.anchors import ANCHORS, PROSE_ANCHORS
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain import explain
from kvtool.engine.diagnosis.findings import Diagnosis, Finding, Fix, Observation
from kvtool.engine.diagnosis.layouts import spread_facts
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.reader import Pasted, candidate_lines
from kvtool.engine.diagnosis.scanner import Scanner
from kvtool.engine.sizing.spec import ModelSpec

__all__ = ["Diagnosis", "Finding", "Fix", "Observation", "LogContext", "diagnose", "diagnose_text"]


def diagnose(stream: BinaryIO, spec: ModelSpec | None = None, total_gpu_gib: float | None = None) -> Diagnosis:
    """Read `stream` (bytes, any size) and explain every failure it shows. `spec` and `total_gpu_gib`
    (from the command line) override what the log says about the model and the GPU."""
    stream = Pasted(stream)
    scanner = Scanner(facts=spread_facts(stream.lines()), paste=stream.whole)
    scanner.scan(candidate_lines(stream, ANCHORS, PROSE_ANCHORS))
    context = scanner.context
    context.update(
        model=spec.name if spec else None,
        total_gpu_gib=total_gpu_gib,
        total_gpu_source="given" if total_gpu_gib else None,
    )
    memory = MemoryModel.from_context(context, spec)
    return Diagnosis(explain(list(scanner.observations.values()), context, memory), context)


def diagnose_text(text: str | bytes, **kwargs) -> Diagnosis:
    import io

    return diagnose(io.BytesIO(text.encode() if isinstance(text, str) else text), **kwargs)
