"""GET /tokenizer_info (with --enable-tokenizer-info-endpoint): the tokenizer's configuration, as vLLM serves it.

The body is what the tokenizer was built with (tokenizer_config.json's fields, as transformers keeps them in
`init_kwargs`) less the paths of its vocabulary files, special tokens written as their text, plus
`tokenizer_class` and the chat template the server applies. It may expose the chat template, which is why
the endpoint is off by default.
"""

from pydantic import BaseModel, ConfigDict

DROPPED_FIELDS = ("vocab_file", "merges_file")  # paths on the server's disk


class TokenizerInfoResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    tokenizer_class: str


def tokenizer_info(tokenizer) -> dict:
    info = {key: _json_value(value) for key, value in (getattr(tokenizer, "init_kwargs", None) or {}).items()}
    for key in DROPPED_FIELDS:
        info.pop(key, None)
    info["tokenizer_class"] = type(tokenizer).__name__
    if template := getattr(tokenizer, "chat_template", None):
        info["chat_template"] = template
    return info


def _json_value(value):
    """A value JSON can carry: an AddedToken as its text, containers item by item, anything else unknown as text."""
    if hasattr(value, "content"):
        return value.content
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
