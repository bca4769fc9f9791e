"""Workloads: lists of `SampleRequest`, built the same way every time for a given seed.

Three sources: random prompts (`random`), a ShareGPT-format JSON file and a JSONL file of prompts.
The benchmark never tokenizes: the token counts it reports come from the server's `usage`.
Random prompts are made of common English words that are one token each in BPE vocabularies,
so `input_len` is close to the prompt's real token count (chat templates add their own tokens).
"""

import json
import random
from dataclasses import dataclass
from pathlib import Path

from kvtool.errors import UsageError

# Common words that BPE tokenizers (GPT-2, Llama, SmolLM2, Qwen) keep as one token with a leading space.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will more "
    "out up into do any your what some can only other time new about two may then first also after "
    "over such where most these well long very must back year just made work life way even day place "
    "world state good people small light house open part great home school water hand city "
    "land line game point story power music paper table river money night field road green sound"
).split()

# A ShareGPT reply's length in tokens is estimated from its characters (about four per token).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class SampleRequest:
    prompt: str
    max_tokens: int
    input_len: int  # the dataset's own estimate; the server's usage gives the real count


@dataclass(frozen=True)
class RandomDataset:
    input_len: int = 256
    output_len: int = 128
    range_ratio: float = 0.0
    prefix_len: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.input_len < 1 or self.output_len < 1 or self.prefix_len < 0:
            raise UsageError("--input-len and --output-len must be >= 1 and --prefix-len >= 0.")
        if not 0.0 <= self.range_ratio < 1.0:
            raise UsageError(f"--range-ratio must be in [0, 1), got {self.range_ratio}.")

    def sample(self, num_requests: int) -> list[SampleRequest]:
        rng = random.Random(self.seed)
        prefix = _random_words(rng, self.prefix_len)
        samples = []
        for _ in range(num_requests):
            input_len = _length_in_range(rng, self.input_len, self.range_ratio)
            output_len = _length_in_range(rng, self.output_len, self.range_ratio)
            prompt = " ".join(prefix + _random_words(rng, input_len))
            samples.append(SampleRequest(prompt, output_len, self.prefix_len + input_len))
        return samples


def _length_in_range(rng: random.Random, length: int, range_ratio: float) -> int:
    low = max(1, round(length * (1 - range_ratio)))
    high = max(low, round(length * (1 + range_ratio)))
    return rng.randint(low, high)


def _random_words(rng: random.Random, count: int) -> list[str]:
    return rng.choices(WORDS, k=count)


@dataclass(frozen=True)
class FileDataset:
    """A ShareGPT JSON file (`.json`) or one prompt per line (`.jsonl`)."""

    path: Path
    output_len: int = 128
    seed: int = 0

    def sample(self, num_requests: int) -> list[SampleRequest]:
        pool = self._load()
        if not pool:
            raise UsageError(
                f"{self.path} holds no usable prompts.", fix="Check the file's format (see docs/bench.md)."
            )
        random.Random(self.seed).shuffle(pool)
        return [pool[i % len(pool)] for i in range(num_requests)]

    def _load(self) -> list[SampleRequest]:
        if not self.path.is_file():
            raise UsageError(
                f"dataset file not found: {self.path}", fix="Pass --dataset random or a path to a .json/.jsonl file."
            )
        text = self.path.read_text(encoding="utf-8")
        try:
            if self.path.suffix == ".jsonl":
                return [self._from_line(json.loads(line)) for line in text.splitlines() if line.strip()]
            return [s for s in map(self._from_conversation, json.loads(text)) if s]
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as err:
            raise UsageError(
                f"cannot read {self.path}: {err}", fix="Use ShareGPT JSON or one JSON prompt per line."
            ) from None

    def _from_line(self, item) -> SampleRequest:
        if isinstance(item, str):
            return SampleRequest(item, self.output_len, _estimate_tokens(item))
        prompt = item["prompt"]
        max_tokens = int(item.get("max_tokens") or item.get("output_len") or self.output_len)
        return SampleRequest(prompt, max_tokens, _estimate_tokens(prompt))

    def _from_conversation(self, entry: dict) -> SampleRequest | None:
        turns = entry["conversations"]
        if len(turns) < 2:
            return None
        prompt, reply = turns[0]["value"], turns[1]["value"]
        return SampleRequest(prompt, max(1, _estimate_tokens(reply)), _estimate_tokens(prompt))


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def load_dataset(
    name: str, *, input_len: int, output_len: int, range_ratio: float, prefix_len: int, seed: int
) -> RandomDataset | FileDataset:
    if name == "random":
        return RandomDataset(input_len, output_len, range_ratio, prefix_len, seed)
    return FileDataset(Path(name), output_len, seed)
