"""Prometheus samples pasted into a report (`curl -s localhost:8000/metrics | grep request_success`), parsed by
prometheus_client's text parser: vLLM counts finished requests by how they finished
(`vllm:request_success_total{finished_reason="length"} 1319`), which reads as a count per finish reason."""

import re
from collections.abc import Iterator

from kvtool.engine.diagnosis.keys import Reading
from kvtool.engine.diagnosis.quantities import BY_NAME
from kvtool.engine.diagnosis.values import NUMBER, convert

# a sample with labels, where it stands in a line (a paste puts prose before it, a table a cell border between the
# series and its value); the parser reads the rest
SAMPLE = re.compile(
    rf"(?<![\w:])(?P<series>[A-Za-z_:][\w:]*\{{[^{{}}\n]{{0,400}}\}})\s*\|?\s*(?P<value>{NUMBER})(?![\w.])"
)
LABEL = "finished_reason"
COUNTED = "request_success"  # vLLM's counter of finished requests, by finished_reason


def finished_requests(text: str) -> Iterator[Reading]:
    """The requests a pasted vLLM counter says finished for each reason: `requests_finished_length` and so on."""
    if LABEL not in text:
        return
    from prometheus_client.parser import text_string_to_metric_families

    for match in SAMPLE.finditer(text):
        try:
            families = list(text_string_to_metric_families(f"{match['series']} {match['value']}\n"))
        except ValueError:
            continue  # no sample after all (a label set in prose)
        for sample in (sample for family in families for sample in family.samples):
            quantity = BY_NAME.get(f"requests_finished_{sample.labels.get(LABEL)}")
            if COUNTED in sample.name and quantity is not None:
                yield quantity.name, convert(quantity, match.group("value")), None, match.span("value")
