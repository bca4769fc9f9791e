"""SamplingParams: how to sample one request, with vLLM's names and defaults, checked on creation."""

import math
from dataclasses import dataclass

from kvtool.engine.runtime.structured_output.params import StructuredOutputsParams
from kvtool.engine.sizing import defaults
from kvtool.engine.sizing import messages as msg
from kvtool.errors import InvalidRequestError

SEED_MIN, SEED_MAX = -defaults.INT64_MAX - 1, defaults.INT64_MAX  # a signed 64-bit seed, as vLLM's request schema


@dataclass
class SamplingParams:
    """How to sample one request, with vLLM's names and defaults.

    Mind the default `max_tokens=16`, as in vLLM: a request that does not set it stops after 16
    tokens with finish_reason "length". `max_tokens=None` means "the rest of the context".
    """

    n: int = 1
    max_tokens: int | None = defaults.DEFAULT_MAX_TOKENS
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: all tokens
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logprobs: int | None = None  # -1: the whole vocabulary
    prompt_logprobs: int | None = None  # per prompt token, as logprobs; computed only for requests that ask
    logprob_token_ids: list[int] | None = None  # logprobs of exactly these ids (and the sampled one) per token
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    structured_outputs: StructuredOutputsParams | None = None
    bad_words_token_ids: list[list[int]] | None = None  # bad_words as tokens, filled in by the engine

    def __post_init__(self):
        self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        self.logit_bias = _clamped_logit_bias(self.logit_bias)
        self.stop_token_ids = list(self.stop_token_ids or [])
        self.top_k = -1 if self.top_k in (0, None) else self.top_k
        self._check()

    def _check(self):
        _require(self.n >= 1, "n", msg.N_BELOW_ONE, value=self.n)
        _require(
            self.max_tokens is None or self.max_tokens >= 1,
            "max_tokens",
            msg.MAX_TOKENS_BELOW_ONE,
            max_tokens=self.max_tokens,
        )
        _require(self.min_tokens >= 0, "min_tokens", msg.MIN_TOKENS_NEGATIVE, min_tokens=self.min_tokens)
        _require(
            self.max_tokens is None or self.min_tokens <= self.max_tokens,
            "min_tokens",
            msg.MIN_TOKENS_OVER_MAX,
            max_tokens=self.max_tokens,
            min_tokens=self.min_tokens,
        )
        _require(
            self.seed is None or SEED_MIN <= self.seed <= SEED_MAX,
            "seed",
            msg.SEED_RANGE,
            low=SEED_MIN,
            high=SEED_MAX,
            value=self.seed,
        )
        self._check_sampling()
        self._check_penalties()
        _require(self.logprobs is None or self.logprobs >= -1, "logprobs", msg.LOGPROBS_NEGATIVE, value=self.logprobs)
        _require(
            self.prompt_logprobs is None or self.prompt_logprobs >= -1,
            "prompt_logprobs",
            msg.PROMPT_LOGPROBS_NEGATIVE,
            value=self.prompt_logprobs,
        )
        _require(all(self.stop), "stop", msg.STOP_EMPTY_STRING)

    def _check_sampling(self):
        _require(math.isfinite(self.temperature), "temperature", msg.TEMPERATURE_NOT_FINITE, value=self.temperature)
        _require(self.temperature >= 0, "temperature", msg.TEMPERATURE_NEGATIVE, value=self.temperature)
        _require(self.temperature <= 2, "temperature", msg.TEMPERATURE_RANGE, value=self.temperature)
        _require(0.0 < self.top_p <= 1.0, "top_p", msg.TOP_P_RANGE, value=self.top_p)
        _require(self.top_k >= -1, "top_k", msg.TOP_K_RANGE, value=self.top_k)
        _require(0.0 <= self.min_p <= 1.0, "min_p", msg.MIN_P_RANGE, value=self.min_p)

    def _check_penalties(self):
        for name in ("presence_penalty", "frequency_penalty"):
            _require(-2.0 <= getattr(self, name) <= 2.0, name, msg.PENALTY_RANGE, name=name, value=getattr(self, name))
        penalty = self.repetition_penalty
        _require(math.isfinite(penalty), "repetition_penalty", msg.REPETITION_PENALTY_NOT_FINITE, value=penalty)
        _require(penalty > 0, "repetition_penalty", msg.REPETITION_PENALTY_NOT_POSITIVE, value=penalty)
        allowed = self.allowed_token_ids
        _require(allowed is None or len(allowed) > 0, "allowed_token_ids", msg.ALLOWED_TOKEN_IDS_EMPTY)

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5

    @property
    def num_logprobs(self) -> int | None:
        """Sample logprobs per output token (None: not asked), counting logprob_token_ids as vLLM does."""
        if self.logprobs is not None:
            return self.logprobs
        return len(self.logprob_token_ids) if self.logprob_token_ids else None

    @property
    def skip_reading_prefix_cache(self) -> bool:
        """A prefix-cache hit would skip prompt positions whose logprobs are asked for (vLLM skips the lookup)."""
        return self.prompt_logprobs is not None


def _require(ok: bool, param: str, template: str, **values) -> None:
    if not ok:
        raise InvalidRequestError(template.format(**values), param)


def _clamped_logit_bias(logit_bias: dict | None) -> dict[int, float] | None:
    """Token id -> bias in [-100, 100]; keys may come as strings (JSON objects have string keys)."""
    if not logit_bias:
        return None
    try:
        return {int(token): min(100.0, max(-100.0, float(bias))) for token, bias in logit_bias.items()}
    except (TypeError, ValueError):
        bad = [token for token in logit_bias if not str(token).lstrip("-").isdigit()]
        raise InvalidRequestError(msg.LOGIT_BIAS_KEYS_NOT_INT.format(keys=repr(bad)), "logit_bias") from None
