"""The sampling fields a benchmark sends: --temperature, --top-p, --top-k and --extra-body JSON."""

import json

from kvtool.errors import UsageError

# Fields bench sets itself: --extra-body may not replace them.
OWN_FIELDS = ("model", "prompt", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens")


def sampling_fields(temperature: float, top_p: float | None, top_k: int | None, extra_body: str | None) -> tuple:
    """(name, value) pairs for every request; --extra-body's fields come last and win over the flags."""
    fields = {"temperature": temperature}
    if top_p is not None:
        fields["top_p"] = top_p
    if top_k is not None:
        fields["top_k"] = top_k
    fields.update(parse_extra_body(extra_body) if extra_body else {})
    return tuple(fields.items())


def parse_extra_body(text: str) -> dict:
    try:
        body = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(
            f"--extra-body is not JSON ({err.msg} at character {err.pos}).",
            fix="Give an object, e.g. --extra-body '{\"min_p\": 0.1}'.",
        ) from None
    if not isinstance(body, dict):
        raise UsageError("--extra-body must be a JSON object.", fix="E.g. --extra-body '{\"min_p\": 0.1}'.")
    if clash := [name for name in body if name in OWN_FIELDS]:
        raise UsageError(
            f"--extra-body may not set {', '.join(clash)}: bench sets it.",
            fix="Use --model, --max-tokens, the dataset or --endpoint instead.",
        )
    return body
