"""The default output cap, which no server reports (vLLM's SamplingParams.max_tokens is 16 in every
release from 0.2.0 to 0.34.0; servers in front of vLLM set their own), where the sign is an absence, which no
fact states: offline code that builds `SamplingParams(...)` without max_tokens (vLLM's own repr always prints
max_tokens, so a call without it is the user's code), and answers said to be cut short next to a sign that no
max_tokens was sent or that it did not take (prose that says so, a wrapper's generate config without it, a
request body without it, `LLM.generate(prompts)` with no SamplingParams at all, a --max-tokens flag given to the
server). An answer whose usage shows where it stopped is read from facts (rules.default_cap)."""

import re
from dataclasses import dataclass

from kvtool.engine.diagnosis import clients
from kvtool.engine.diagnosis.cut_words import CUT_GATES, CUT_SHORT
from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.sizing.defaults import DEFAULT_MAX_TOKENS

SAMPLING_PARAMS_CALL = re.compile(r"\bSamplingParams\(")
MAX_CALL_LINES = 20  # a call spread over more lines than this is not followed
PAIRING_LINES = 40  # how far apart the two may be
# A line with none of these (and no call still open) leaves the trackers as they were.
GATES = FINISH_GATE, COMPLETION_GATE, PROMPT_GATE, CALL_GATE = (
    "finish_reason",
    "completion_tokens",
    "prompt_tokens",
    "SamplingParams(",
)


_MAX_TOKENS = r"max[_ ]?(?:new[_ ]?|completion[_ ]?|output[_ ]?)?tokens"
NOT_SET = re.compile(
    rf"\b{_MAX_TOKENS}(?:is)?\W{{0,3}}(?:\w+\W+){{0,4}}?(?:is |was |are |were |gets? |seems? )?"
    r"(?:not (?:set|included|specified|provided|passed|given|sent|forwarded|applied|respected|honou?red|working)"
    r"|missing|absent|omitted|unset|disabled|ignored|dropped|None\b|null\b|(?:has|had) no effect)"
    r"|\b(?:without|no|omit\w*|missing|(?:not|never) (?:set|includ|pass|specif|send|provid)\w*)\s+(?:(?:the|a|any)\s+)?"
    + _MAX_TOKENS
    + rf"|(?:未|没有|不)(?:设置|指定|传入?)\s*{_MAX_TOKENS}|{_MAX_TOKENS}\s*(?:不生效|无效|没有?生效|没用)",
    re.IGNORECASE,
)
# a call or a config that leaves the default in place: LLM.generate(prompts) with no SamplingParams (once vLLM's
# LLM( is in the paste), Xinference's "generate config: {...}" log line without max_tokens, LangChain's vLLM
# wrappers built without one (their defaults: 256 tokens for VLLMOpenAI, 512 for VLLM), a request's JSON body
# without one
DEFAULT_CALL = re.compile(
    r"\.generate\(\s*[^,()=\n]+\)|generate config: \{(?![^}\n]*max_tokens)[^}\n]*\}"
    r"|\b(?P<wrapper>VLLM(?:OpenAI)?)\((?![^)\n]*max_(?:new_)?tokens)[^)\n]*\)"
    r"""|\{[^{}\n]*"(?:prompt|messages)"\s*:(?![^\n]*max_(?:completion_)?tokens)"""  # a request body without it
)
_CALL_GATES = (".generate(", "generate config", "LLM(", "LLMOpenAI(", '"prompt"', '"messages"')
_MAX_TOKENS_GATES = (
    "ax_tokens", "ax_new_tokens", "ax_completion_tokens", "ax_output_tokens", "ax tokens", "ax new tokens",
    "ax output tokens", "ax completion tokens", "-max-tokens", "-max_tokens", "-max-new-tokens", "axTokens",
    "axNewTokens",
)  # fmt: skip
COMPLAINT_GATES = (*CUT_GATES, *_MAX_TOKENS_GATES, *_CALL_GATES)
NOT_SET_DETAIL = "max_tokens not set"
# vLLM's offline API in the paste: its LLM(...), or the outputs LLM.generate returns
OFFLINE_SIGNS = ("LLM(", "RequestOutput(", "CompletionOutput(")
# max_tokens given to the server as a flag: vLLM has none (max_tokens is a request field), so requests keep the default
# LangChain's vLLM wrappers' own max_tokens when none is given (clients.py)
WRAPPER_DEFAULTS = {"VLLMOpenAI": clients.BY_NAME["LangChain's VLLMOpenAI"].default}
WRAPPER_DEFAULTS["VLLM"] = clients.BY_NAME["LangChain's VLLM"].default
SERVER_FLAG = re.compile(r"--max[_-](?:new[_-])?tokens\b")


@dataclass(frozen=True)
class Signs:
    """What a line tells the tracker below. Its regexes are digit-blind, so every line of a shape tells the same,
    at the same place: the scanner works it out once per shape."""

    cut: tuple[int, int] | None = None  # where it says an answer was cut short
    unset: bool = False  # it says max_tokens was not set (or gives the server a --max-tokens flag)
    call: tuple[bool, int | None] | None = None  # a call that leaves the default: (LLM.generate, the default left)
    offline: bool = False  # vLLM's offline API: LLM(...) or its outputs


def signs_of(line: str) -> Signs:
    cut = match.span() if any(gate in line for gate in CUT_GATES) and (match := CUT_SHORT.search(line)) else None
    unset, call = False, None
    if any(gate in line for gate in _MAX_TOKENS_GATES) and (NOT_SET.search(line) or SERVER_FLAG.search(line)):
        unset = True
    elif any(gate in line for gate in _CALL_GATES) and (found := DEFAULT_CALL.search(line)):
        generate = found.group(0).startswith(".")
        call = generate, DEFAULT_MAX_TOKENS if generate else WRAPPER_DEFAULTS.get(found.group("wrapper") or "")
    return Signs(cut, unset, call, any(sign in line for sign in OFFLINE_SIGNS))


class CutShortWithoutMaxTokens:
    """Answers said to be cut short within PAIRING_LINES of a sign that max_tokens was not set; once a log."""

    def __init__(self):
        self._cut_at = self._unset_at = self._generate_at = -PAIRING_LINES - 1
        self._cut: tuple[str, tuple[int, int]] = ("", (0, 0))
        self._offline = self._done = False
        self._numbers: dict = {}  # vLLM's own default, where the sign is LLM.generate without SamplingParams

    def feed(self, line: str, index: int, signs: Signs | None = None) -> Observation | None:
        """`signs`: what the line tells, where the caller has it (its shape's); else read from the line."""
        if self._done:
            return None
        signs = signs or signs_of(line)
        self._offline = self._offline or signs.offline
        if signs.cut:
            self._cut_at, self._cut = index, (line, signs.cut)
        if signs.unset:
            self._unset_at = index
        elif signs.call:
            generate, default = signs.call
            self._generate_at = index if generate else self._generate_at
            if self._offline or not generate:
                self._unset_at = index
                self._numbers = {"default_max_tokens": default} if default else {}
        if self._offline and 0 <= index - self._generate_at <= PAIRING_LINES:  # its outputs show it was vLLM's
            self._unset_at, self._numbers = self._generate_at, {"default_max_tokens": DEFAULT_MAX_TOKENS}
        if min(self._cut_at, self._unset_at) < 0 or abs(self._cut_at - self._unset_at) > PAIRING_LINES:
            return None
        self._done = True
        evidence, span = evidence_window(*self._cut)
        return Observation("max_tokens_default_truncation", "request", self._numbers, evidence, span, NOT_SET_DETAIL)


class OfflineDefaults:
    """`SamplingParams(` ... `)` (possibly over several lines) with no max_tokens in it."""

    def __init__(self):
        self.call: list[str] = []  # the lines of a call still open
        self._depth = 0

    def feed(self, line: str) -> Observation | None:
        if not self.call:
            if CALL_GATE not in line or not (match := SAMPLING_PARAMS_CALL.search(line)):
                return None
            line = line[match.start() :]
        self.call.append(line)
        self._depth += line.count("(") - line.count(")")
        if self._depth > 0 and len(self.call) < MAX_CALL_LINES:
            return None
        call, closed = "\n".join(self.call), self._depth <= 0
        self.call, self._depth = [], 0
        if not closed or "max_tokens" in call:
            return None
        evidence, span = evidence_window(call, (0, len(call)))
        return Observation(
            "max_tokens_default_truncation", "request", {"max_tokens": DEFAULT_MAX_TOKENS}, evidence, span
        )
