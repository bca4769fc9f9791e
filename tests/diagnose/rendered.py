"""Every wording rendered as people paste it: each template of wordings.py formatted with numbers,
for releases in its range, on one line, wrapped at 60 and 80 columns, behind a log prefix on every
line, quoted in Markdown, inside a JSON error body and inside a JSON log line."""

import json
import re
import textwrap
from dataclasses import dataclass
from string import Formatter

from kvtool.engine.diagnosis.patterns import ALIASES, SPECIAL, TEXT
from kvtool.engine.diagnosis.wordings import WORDINGS, Wording

RELEASES = (
    "0.2.0 0.2.1.post1 0.2.2 0.2.3 0.2.4 0.2.5 0.2.6 0.2.7 0.3.0 0.3.1 0.3.2 0.3.3 0.4.0 0.4.0.post1 0.4.1 0.4.2 "
    "0.4.3 0.5.0 0.5.0.post1 0.5.1 0.5.2 0.5.3 0.5.3.post1 0.5.4 0.5.5 0.6.0 0.6.1 0.6.1.post1 0.6.1.post2 0.6.2 "
    "0.6.3 0.6.3.post1 0.6.4 0.6.4.post1 0.6.5 0.6.6 0.6.6.post1 0.7.0 0.7.1 0.7.2 0.7.3 0.8.0 0.8.1 0.8.2 0.8.3 "
    "0.8.4 0.8.5 0.8.5.post1 0.9.0 0.9.0.1 0.9.1 0.9.2 0.10.0 0.10.1 0.10.1.1 0.10.2 0.11.0 0.11.1 0.11.2 0.12.0 "
    "0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 0.19.1 0.20.0 0.20.1 0.20.2 "
    "0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 "
    "0.33.0 0.34.0"
).split()
PREFIX = "(APIServer pid=1) ERROR 05-01 14:39:06 [core.py:1131] "
VARIANTS = ("one line", "wrapped at 60", "wrapped at 80", "prefixed", "quoted", "JSON body", "JSON log line")
TEXT_VALUES = {
    "param": "max_tokens",
    "tp_param": "truncate_prompt_tokens",
    "prompt_type": "decoder",
    "operation": "score",
    "device": "cuda:0",
    "url": "https://docs.vllm.ai/en/latest/",
    "request_id": "cmpl-7",
    "task": "task='embed'",
    "derived_key": "max_position_embeddings",
    "requested_model": "meta-llama/Llama-3.1-8B",
    "aliases": "smollm2",
    "mm_placeholders": "{'image': 16384}",
    "qualifier": "at least ",
    "url_sentence": " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
    "prefix": "",
}


@dataclass(frozen=True)
class Case:
    wording: Wording
    release: str
    variant: str
    text: str
    numbers: dict  # what diagnose must read, by name

    @property
    def id(self) -> str:
        return f"{self.wording.category}|{self.release}|{self.variant}|{self.wording.template[:40]}"


def values(seed: int) -> dict:
    """Numbers that make sense together (a prompt longer than the context, a cache fuller than 90 %)."""
    limit = 4096 * (1 + seed % 4)
    return dict(
        max_model_len=limit,
        prompt_tokens=limit + 808 + seed,
        max_tokens=1000 + seed,
        requested_tokens=2 * limit + 1808 + 2 * seed,
        prompt_characters=9 * limit,
        max_input_characters=7 * limit,
        max_input_tokens=limit - 1000,
        truncate_prompt_tokens=limit + 5,
        lookahead_slots=1 + seed % 3,
        kv_cache_tokens=limit - 432,
        kv_needed_gib="16.00",
        kv_available_gib="9.63",
        estimated_max_model_len=limit - 512,
        initial_free_bytes=32212254720,
        current_free_bytes=48318382080,
        initial_used_bytes=48318382080,
        current_used_bytes=32212254720,
        initial_free_gib="30.5",
        current_free_gib="45.2",
        free_gib="40.5",
        total_gib="79.19",
        gpu_memory_utilization=0.92,
        requested_gib="72.85",
        dummy_requests=256 * (1 + seed % 4),
        num_preemptions=50 + seed,
        preemption_mode=("PreemptionMode.RECOMPUTE", "PreemptionMode.SWAP")[seed % 2],
        num_running=64 + seed,
        num_waiting=20 + seed,
        kv_cache_usage_percent=99.1,
        max_num_batched_tokens=2048,
        max_num_seqs=4096,
        derived_max_model_len=131072,
        needed_gib="16.0",
        available_gib="9.63",
        estimate=limit - 512,
        derived=131072,
        total_tokens=2 * limit + 1808 + 2 * seed,
        tried_gib="2.00",
        prompt_limit=limit,
        profiling_seq_len=limit // 256,
        mm_worst_case_tokens=limit + 16384,
        max_num_scheduled_tokens=-1024 - seed,
        max_tokens_per_mm_item=2496 + seed,
        **TEXT_VALUES,
    )


def render(wording: Wording, seed: int) -> tuple[str, dict]:
    given = values(seed)
    names = {name for _, name, _, _ in Formatter().parse(wording.template) if name}
    text = wording.template.format(**{name: given[name] for name in names})
    expected = {}
    for name in names - set(TEXT) - set(SPECIAL):
        name_read, value = ALIASES.get(name, name), float(given[name])
        if name.endswith("_bytes"):
            name_read, value = name[:-6] + "_gib", value / (1 << 30)
        expected[name_read] = value
    return text, expected


def in_range(versions: str) -> list[str]:
    if not versions[0].isdigit():  # kvtool's own, or a server's in front of vLLM
        return [versions]
    found = []
    for part in versions.split(", "):
        first, _, last = part.partition("-")
        start, end = RELEASES.index(first), RELEASES.index(last or first)
        found += RELEASES[start : end + 1]
    return found


def releases_of(wording: Wording, per_wording: int = 3) -> list[str]:
    """The first, a middle and the last release of the wording's range."""
    releases = in_range(wording.versions)
    picks = {releases[0], releases[len(releases) // 2], releases[-1]}
    return [release for release in releases if release in picks][:per_wording]


def variant(text: str, name: str, release: str, category: str) -> str:
    if category == "request_too_long" and release in RELEASES and _at_least(release, "0.14.0"):
        text += " (parameter=max_tokens, value=5000)"  # VLLMValidationError's suffix, 0.14 onwards
    wrapped = {"wrapped at 60": 60, "wrapped at 80": 80, "prefixed": 80, "quoted": 75, "JSON log line": 60}.get(name)
    lines = textwrap.wrap(text, wrapped, break_on_hyphens=False) if wrapped else [text]
    if name == "prefixed":
        lines = [PREFIX + line for line in lines]
    elif name == "quoted":
        lines = ["> " + line for line in lines]
    elif name == "JSON body":
        lines = [json.dumps({"error": {"message": text, "type": "BadRequestError", "param": None, "code": 400}})]
    elif name == "JSON log line":
        lines = [json.dumps({"log": "\n".join(lines) + "\n", "stream": "stderr", "time": "2025-05-01T14:39:06Z"})]
    return "\n".join(lines) + "\n"


def _at_least(release: str, than: str) -> bool:
    return RELEASES.index(release) >= RELEASES.index(than)


def cases() -> list[Case]:
    out = []
    for index, wording in enumerate(WORDINGS):
        for seed, release in enumerate(releases_of(wording)):
            text, numbers = render(wording, index + seed)
            for name in VARIANTS:
                out.append(Case(wording, release, name, variant(text, name, release, wording.category), numbers))
    return out


def numbers_in(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?", text)}
