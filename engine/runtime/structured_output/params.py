"""StructuredOutputsParams: what the output must match, with vLLM 0.33's names (vllm/sampling_params.py)."""

import json
from dataclasses import dataclass

from kvtool.errors import UsageError

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
            raise UsageError("You can only use one kind of structured outputs constraint but multiple are "
                             f"specified: {self._constraints()}")
        if not given:
            raise UsageError("You must use one kind of structured outputs constraint but none are specified: "
                             f"{self._constraints()}")

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
