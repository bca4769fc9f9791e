"""The `kvtool serve` flags that change what responses carry, declared once, named and meaning as vLLM's."""

from typing import Annotated

import typer

RESPONSES = "Responses"

MaxLogprobs = Annotated[
    int | None,
    typer.Option(
        help="Most logprobs a request may ask for (logprobs, top_logprobs, prompt_logprobs); -1: the whole "
        "vocabulary \\[default: 20, vLLM's].",
        rich_help_panel=RESPONSES,
    ),
]
ReturnTokensAsTokenIds = Annotated[
    bool,
    typer.Option(
        "--return-tokens-as-token-ids",
        help="Logprob tokens read `token_id:{id}` (a request's return_tokens_as_token_ids decides for itself).",
        rich_help_panel=RESPONSES,
    ),
]
EnablePromptTokensDetails = Annotated[
    bool,
    typer.Option(
        "--enable-prompt-tokens-details",
        help="usage.prompt_tokens_details.cached_tokens: the prompt tokens found in the prefix cache.",
        rich_help_panel=RESPONSES,
    ),
]
EnableForceIncludeUsage = Annotated[
    bool,
    typer.Option(
        "--enable-force-include-usage",
        help="Every stream carries usage, in every chunk, whatever its stream_options.",
        rich_help_panel=RESPONSES,
    ),
]
EnablePerRequestMetrics = Annotated[
    bool,
    typer.Option(
        "--enable-per-request-metrics",
        help="A `metrics` object (time to first token, decode and queue time, inter-token latency, tokens/s) in "
        "answers of one prompt and n = 1, and in a stream's usage chunk.",
        rich_help_panel=RESPONSES,
    ),
]
