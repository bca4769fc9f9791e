"""Grammar compilation with xgrammar: one compiled grammar per distinct constraint, kept in a bounded cache.

The same backend and settings as vLLM 0.33's default (vllm/v1/structured_output/backend_xgrammar.py):
any whitespace between JSON tokens unless `disable_any_whitespace`, `choice` rewritten as an EBNF
alternation, `json_object` as the schema {"type": "object"}.
"""

import json
import re
import threading
from collections import OrderedDict

import xgrammar as xgr

from kvtool.engine.runtime.structured_output.params import StructuredOutputsParams
from kvtool.engine.sizing import messages
from kvtool.errors import InvalidRequestError

CACHE_SIZE = 256


class StructuredOutputError(InvalidRequestError):
    """A constraint the grammar engine cannot compile (HTTP 400, saying why; no `param`, as vLLM)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message, param)


class GrammarCompiler:
    def __init__(self, tokenizer, vocab_size: int, stop_token_ids: set[int]):
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_token_ids)
        )
        self.vocab_size = vocab_size
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.cache: OrderedDict[tuple, xgr.CompiledGrammar] = OrderedDict()
        self.num_compiled = 0  # compilations run, as opposed to cache hits
        self._lock = threading.Lock()

    def compile(self, params: StructuredOutputsParams) -> xgr.CompiledGrammar:
        key = params.key()
        with self._lock:
            if key in self.cache:
                self.cache.move_to_end(key)
                return self.cache[key]
        compiled = self._compile(params)
        with self._lock:
            self.cache[key] = compiled
            self.num_compiled += 1
            if len(self.cache) > CACHE_SIZE:
                self.cache.popitem(last=False)
        return compiled

    def matcher(self, params: StructuredOutputsParams) -> xgr.GrammarMatcher:
        return xgr.GrammarMatcher(self.compile(params))

    def _compile(self, params: StructuredOutputsParams) -> xgr.CompiledGrammar:
        kind = params.kind
        if kind == "structural_tag":
            raise StructuredOutputError(
                messages.STRUCTURAL_TAG_NOT_SUPPORTED.format(what="structured_outputs.structural_tag")
            )
        if kind in ("json", "json_object"):
            return self._json(params)
        if kind == "regex":
            compile_, spec, what = self.compiler.compile_regex, params.regex, "regex"
        elif kind == "choice":
            compile_, spec, what = self.compiler.compile_grammar, choice_as_grammar(params.choice), "choices"
        else:
            compile_, spec, what = self.compiler.compile_grammar, params.grammar, "grammar"
        if kind == "regex" and "\x00" in spec:
            raise StructuredOutputError(messages.REGEX_HAS_NUL)
        try:
            return compile_(spec)
        except Exception as err:
            if kind == "grammar":
                raise StructuredOutputError(messages.GRAMMAR_INVALID.format(reason=_first_line(err))) from err
            message = messages.GRAMMAR_NOT_COMPILED.format(what=what, reason=_first_line(err))
            raise StructuredOutputError(message) from err

    def _json(self, params: StructuredOutputsParams) -> xgr.CompiledGrammar:
        schema = '{"type": "object"}' if params.json_object else params.json
        if isinstance(schema, str):
            try:
                json.loads(schema)
            except json.JSONDecodeError as err:
                raise StructuredOutputError(messages.JSON_GRAMMAR_INVALID.format(reason=err)) from err
        else:
            schema = json.dumps(schema)
        separators = (",", ":") if params.disable_any_whitespace else None
        try:
            return self.compiler.compile_json_schema(
                schema, any_whitespace=not params.disable_any_whitespace, separators=separators
            )
        except Exception as err:
            message = messages.GRAMMAR_NOT_COMPILED.format(what="json schema", reason=_first_line(err))
            raise StructuredOutputError(message) from err


def choice_as_grammar(choices: list[str]) -> str:
    """`root ::= "a" | "b"`, each choice an escaped EBNF string literal."""
    if not choices:
        raise StructuredOutputError(messages.CHOICE_EMPTY)
    return "root ::= " + " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)


def _first_line(err: Exception) -> str:
    """The native library's reason, without its time stamp and source location."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    return _NATIVE_PREFIX.sub("", line)


_NATIVE_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")
