"""One /metrics page, parsed with prometheus_client's text parser and read by quantity (see names.py)."""

from collections import defaultdict
from dataclasses import dataclass

from kvtool.errors import KvtoolError
from kvtool.monitor.names import BY_KEY, CACHE_CONFIG_INFO, V0, V0_ONLY, V1


class MetricsUnavailable(KvtoolError):
    """The URL gives no vLLM metrics: nothing answers, the page is not Prometheus text, or it has no vllm: metric."""


@dataclass(frozen=True)
class Page:
    version: str  # V0 | V1
    samples: dict  # sample name -> [prometheus_client Sample]

    def metric_name(self, key: str) -> str | None:
        """The name `key` is read from on this page (None when the page has none of its names)."""
        suffix = "_bucket" if BY_KEY[key].kind == "histogram" else ""
        return next((n for n in BY_KEY[key].names(self.version) if n + suffix in self.samples), None)

    def value(self, key: str, combine=sum) -> float | None:
        """A gauge or counter, combined over label sets (engines, models); None when absent."""
        name = self.metric_name(key)
        return None if name is None else combine(s.value for s in self.samples[name])

    def buckets(self, key: str) -> dict[float, float] | None:
        """A histogram's cumulative bucket counts by upper bound, summed over label sets."""
        name = self.metric_name(key)
        if name is None:
            return None
        counts: dict[float, float] = defaultdict(float)
        for sample in self.samples[name + "_bucket"]:
            counts[float(sample.labels["le"])] += sample.value
        return dict(sorted(counts.items()))

    def histogram_total(self, key: str, part: str) -> float | None:
        """A histogram's `_sum` or `_count`, summed over label sets."""
        name = self.metric_name(key)
        samples = self.samples.get(f"{name}_{part}") if name else None
        return sum(s.value for s in samples) if samples else None

    def model_names(self) -> list[str]:
        return sorted(
            {s.labels["model_name"] for group in self._vllm_groups() for s in group if "model_name" in s.labels}
        )

    def num_engines(self) -> int:
        """Engines (V1's `engine` label) per model, summed over models; 1 for a V0 server."""
        running = self.samples.get("vllm:num_requests_running", [])
        return len({(s.labels.get("model_name"), s.labels.get("engine")) for s in running}) or 1

    def cache_config(self) -> dict[str, str]:
        """The labels of vllm:cache_config_info (block_size, num_gpu_blocks, cache_dtype, ...), if exposed."""
        samples = self.samples.get(CACHE_CONFIG_INFO)
        return dict(samples[0].labels) if samples else {}

    def _vllm_groups(self):
        return (group for name, group in self.samples.items() if name.startswith("vllm:"))


def parse_page(text: str, source: str = "the page") -> Page:
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list] = defaultdict(list)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[sample.name].append(sample)
    except (ValueError, IndexError, KeyError, TypeError):  # what the parser raises on text that is not the format
        raise MetricsUnavailable(f"{source} is not Prometheus text.", fix="Point at the server's /metrics.") from None
    if not any(name.startswith("vllm:") for name in samples):
        raise MetricsUnavailable(
            f"{source} has no vLLM metrics (no vllm:* names).", fix="Point at a vLLM or kvtool serve server's /metrics."
        )
    version = V0 if any(name in samples for name in V0_ONLY) else V1
    return Page(version, dict(samples))
