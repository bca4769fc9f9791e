"""StructuredOutputsParams: what the output must match, with vLLM 0.33's names (vllm/sampling_params.py)."""

import json
from dataclasses import dataclass

from kvtool.engine.sizing import messages
from kvtool.errors import InvalidRequestError

KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


@dataclass
class StructuredOutputsParams:
    """Exactly one constraint: a JSON schema, a regex, a list of choices, an EBNF grammar or any JSON object."""

    json: str | dict | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    def __post_init__(self):
        given = [kind for kind in KINDS if getattr(self, kind) is not None]
        if len(given) > 1:
            message = messages.STRUCTURED_MULTIPLE_KINDS.format(constraints=self._constraints())
            raise InvalidRequestError(message, "structured_outputs")
        if not given:
            message = messages.STRUCTURED_NO_KIND.format(constraints=self._constraints())
            raise InvalidRequestError(message, "structured_outputs")

    @property
    def kind(self) -> str:
        return next(kind for kind in KINDS if getattr(self, kind) is not None)

    def key(self) -> tuple:
        """What identifies the compiled grammar: the constraint and the options that change it."""
        spec = getattr(self, self.kind)
        if not isinstance(spec, str):
            spec = json.dumps(spec, sort_keys=True)
        return self.kind, spec, self.disable_any_whitespace, self.disable_additional_properties

    def _constraints(self) -> dict:
        return {kind: getattr(self, kind) for kind in KINDS}
