"""POST /v1/decisions request and response bodies, as vLLM 0.33 defines them
(vllm/entrypoints/openai/decisions/protocol.py): text input, questions of three types, answers with the
probability of each option.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from kvtool.engine.server.protocol import MODEL_MARK, StrictModel
from kvtool.engine.sizing import messages

ShortText = Annotated[str, Field(max_length=1048576)]
InputText = Annotated[str, Field(max_length=10485760)]
ChoiceValue = str | bool


class DecisionModel(StrictModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class DecisionInputText(DecisionModel):
    type: Literal["input_text"]
    text: InputText


class DecisionInputMessage(DecisionModel):
    role: Literal["user"]
    content: InputText | Annotated[list[DecisionInputText], Field(max_length=16384)]
    type: Literal["message"] = "message"

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        parts = data.get("content") if isinstance(data, dict) else None
        if isinstance(parts, list) and any(isinstance(p, dict) and p.get("type") == "input_image" for p in parts):
            raise ValueError(messages.DECISIONS_TEXT_ONLY)
        return data

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "\n".join(part.text for part in self.content)


class QuestionBase(DecisionModel):
    instructions: ShortText
    name: ShortText | None = None

    @model_validator(mode="after")
    def _name_given_as_null(self):
        if "name" in self.model_fields_set and self.name is None:
            raise ValueError(messages.DECISIONS_NAME_NULL)
        return self


class PredicateQuestion(QuestionBase):
    type: Literal["predicate"]


class ChoiceOption(DecisionModel):
    value: ChoiceValue
    description: ShortText = ""


class ChoiceQuestion(QuestionBase):
    type: Literal["choice"]
    choices: list[ChoiceOption] = Field(min_length=2, max_length=255)

    @model_validator(mode="after")
    def _distinct(self):
        values = [(type(c.value), c.value) for c in self.choices]
        if len(set(values)) != len(values):
            raise ValueError(messages.DECISIONS_CHOICES_NOT_DISTINCT)
        return self


class ScoreLevel(DecisionModel):
    label: ShortText
    description: ShortText = ""


class ScoreQuestion(QuestionBase):
    type: Literal["score"]
    levels: list[ScoreLevel] = Field(min_length=2, max_length=10)


DecisionQuestion = Annotated[PredicateQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class DecisionRequest(DecisionModel):
    model: Annotated[str, Field(max_length=1048576, json_schema_extra={MODEL_MARK: True})]
    # the list first: a message's own error (an image part) is then the first one reported
    input: Annotated[list[DecisionInputMessage], Field(max_length=131072)] | InputText
    questions: list[DecisionQuestion] = Field(min_length=1, max_length=200)
    safety_identifier: Annotated[str, Field(max_length=128)] | None = None
    joint: bool = Field(False, description="vLLM extension: joint reads, diffusion models only.")
    cache_salt: str | None = Field(None, min_length=1, max_length=1024)

    def input_text(self) -> str:
        """The state every question reads: the text, or the messages' texts apart by a blank line."""
        return self.input if isinstance(self.input, str) else "\n\n".join(message.text() for message in self.input)


class PredicateAnswer(DecisionModel):
    type: Literal["predicate"] = "predicate"
    name: str | None
    probability: float


class ChoiceProbability(DecisionModel):
    value: ChoiceValue
    probability: float


class ChoiceAnswer(DecisionModel):
    type: Literal["choice"] = "choice"
    name: str | None
    choice: ChoiceValue
    probabilities: list[ChoiceProbability]
    confidence: float


class ScoreProbability(DecisionModel):
    value: int
    label: str
    probability: float


class ScoreAnswer(DecisionModel):
    type: Literal["score"] = "score"
    name: str | None
    score: float
    probabilities: list[ScoreProbability]
    confidence: float


class InputTokensDetails(DecisionModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(DecisionModel):
    reasoning_tokens: int = 0


class DecisionUsage(DecisionModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class DecisionResponse(DecisionModel):
    model: str
    answers: list[Annotated[PredicateAnswer | ChoiceAnswer | ScoreAnswer, Field(discriminator="type")]]
    usage: DecisionUsage
