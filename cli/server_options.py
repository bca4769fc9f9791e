"""`kvtool serve`'s flags for the HTTP server and the API, declared once, under vLLM's names.

The API keys are read from `--api-key` (repeated for several), else KVTOOL_API_KEY, else VLLM_API_KEY (the
variable `vllm serve` reads), so that a deployment written for vLLM keeps its key.
"""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.typer_click import ParamType
from kvtool.engine.server.defaults import API_KEY_ENVIRONMENT
from kvtool.errors import UsageError

SERVER, REQUESTS = "Server", "Requests"


class UrlPrefix(ParamType):
    """A path prefix: /llm (a trailing slash is dropped)."""

    name = "path"

    def convert(self, value, param, ctx) -> str:
        if not value.startswith("/"):
            flag = param.opts[0]
            raise UsageError(f"{flag} must start with '/', got {value!r}.", f"Use {flag} /{value.strip('/')}.")
        return value.rstrip("/")


class SocketPath(ParamType):
    """Where a unix socket will be made: its folder must exist."""

    name = "path"

    def convert(self, value, param, ctx) -> str:
        folder = Path(value).expanduser().parent
        if not folder.is_dir():
            flag = param.opts[0]
            raise UsageError(f"{flag} {value}: the folder {folder} does not exist.", "Create it, or name another path.")
        return str(Path(value).expanduser())


ApiKey = Annotated[
    list[str] | None,
    typer.Option(
        envvar=list(API_KEY_ENVIRONMENT),
        help="Require `Authorization: Bearer KEY` on /v1, /v2, /inference and /cohere routes; repeat the flag for "
        "several keys (any one is accepted); without it, KVTOOL_API_KEY, else VLLM_API_KEY (several keys separated "
        "by spaces).",
        rich_help_panel=SERVER,
    ),
]
RootPath = Annotated[
    str | None,
    typer.Option(
        click_type=UrlPrefix(),
        help="The path prefix a path-routing proxy adds (e.g. /llm): routes answer under it as well as without it.",
        rich_help_panel=SERVER,
    ),
]
Uds = Annotated[
    str | None,
    typer.Option(
        click_type=SocketPath(),
        help="Serve on this unix domain socket instead of --host and --port.",
        rich_help_panel=SERVER,
    ),
]
EnableServerLoadTracking = Annotated[
    bool,
    typer.Option(
        help="Count the generation requests in flight, answered by GET /load (0 when off).", rich_help_panel=SERVER
    ),
]
EnableRequestIdHeaders = Annotated[
    bool,
    typer.Option(
        help="Put X-Request-Id on every reply: the request's own, else a new uuid4 hex (without the flag, only "
        "a request's own is sent back).",
        rich_help_panel=SERVER,
    ),
]
EnableTokenizerInfoEndpoint = Annotated[
    bool,
    typer.Option(
        help="Answer GET /tokenizer_info: the tokenizer's configuration and chat template (off by default: it "
        "exposes the template).",
        rich_help_panel=SERVER,
    ),
]
EnablePromptEmbeds = Annotated[
    bool,
    typer.Option(
        help="Accept `prompt_embeds` (completions) and `prompt_embeds` content parts (chat): base64 of a "
        "torch-saved (num_tokens, hidden_size) tensor, run from the embeddings instead of token ids.",
        rich_help_panel=REQUESTS,
    ),
]
