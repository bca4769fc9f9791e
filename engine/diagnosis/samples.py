"""Prometheus samples pasted into a report (`curl -s localhost:8000/metrics | grep request_success`, a DCGM
exporter's), parsed by prometheus_client's text parser: vLLM counts finished requests by how they finished
(`vllm:request_success_total{finished_reason="length"} 1319`), which reads as a count per finish reason; its
histogram of generated tokens gives their sum and the requests counted; DCGM gives a GPU's framebuffer in use and
free, in MiB (`DCGM_FI_DEV_FB_USED{gpu="3",...} 61716`), nvidia_gpu_exporter its memory in bytes."""

import re
from collections.abc import Iterator

from kvtool.engine.diagnosis.keys import Reading
from kvtool.engine.diagnosis.quantities import BY_NAME, Quantity
from kvtool.engine.diagnosis.values import NUMBER, convert

# a sample, where it stands in a line (a paste puts prose before it, a table a cell border between the series and
# its value); the parser reads the rest. Labels are optional where the series is one of METRICS.
SAMPLE = re.compile(
    rf"(?<![\w:])(?P<series>[A-Za-z_:][\w:]*(?:\{{[^{{}}\n]{{0,400}}\}})?)\s*\|?\s*(?P<value>{NUMBER})(?![\w.])"
)
# the series read as a quantity, and the unit of their values
METRICS = {
    "DCGM_FI_DEV_FB_USED": ("gpu_used_gib", "MiB"),
    "DCGM_FI_DEV_FB_FREE": ("free_gib", "MiB"),
    "DCGM_FI_DEV_FB_TOTAL": ("total_gib", "MiB"),
    # nvidia_gpu_exporter's, from nvidia-smi's query, in bytes
    "nvidia_smi_memory_used_bytes": ("gpu_used_gib", "bytes"),
    "nvidia_smi_memory_free_bytes": ("free_gib", "bytes"),
    "nvidia_smi_memory_total_bytes": ("total_gib", "bytes"),
    "vllm:request_generation_tokens_sum": ("generation_tokens_sum", None),
    "vllm:request_generation_tokens_count": ("generation_requests", None),
    "vllm:request_params_max_tokens_bucket": ("max_tokens_histogram", None),  # a bucket's count, no max_tokens
}
LABEL = "finished_reason"
COUNTED = "request_success"  # vLLM's counter of finished requests, by finished_reason


def finished_requests(text: str) -> Iterator[Reading]:
    """The requests a pasted vLLM counter says finished for each reason (`requests_finished_length` and so on), and
    the series of METRICS."""
    counted, named = LABEL in text, [name for name in METRICS if name in text]
    if not counted and not named:
        return
    from prometheus_client.parser import text_string_to_metric_families

    for match in SAMPLE.finditer(text):
        if "{" not in match["series"] and match["series"] not in named:
            continue
        try:
            families = list(text_string_to_metric_families(f"{match['series']} {match['value']}\n"))
        except ValueError:
            continue  # no sample after all (a label set in prose)
        for sample in (sample for family in families for sample in family.samples):
            if (reading := _quantity(sample)) is not None:
                quantity, unit = reading
                yield quantity.name, convert(quantity, match.group("value"), unit), unit, match.span("value")


def _quantity(sample) -> tuple[Quantity, str | None] | None:
    if COUNTED in sample.name:
        quantity = BY_NAME.get(f"requests_finished_{sample.labels.get(LABEL)}")
        return (quantity, None) if quantity is not None else None
    if sample.name in METRICS:
        name, unit = METRICS[sample.name]
        return BY_NAME[name], unit
    return None
