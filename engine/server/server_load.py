"""vLLM's `--enable-server-load-tracking`: the generation requests in flight, answered by GET /load.

vLLM counts a request from the moment its route starts until its response is sent (or fails). Here an ASGI
middleware does the counting around the whole exchange, so a client that leaves mid-stream is uncounted too.
"""

from __future__ import annotations

# The routes that run the model (vLLM decorates the same ones with `load_aware_call`), under any --root-path.
LOAD_TRACKED_PATHS = frozenset(
    {"/v1/completions", "/v1/chat/completions", "/v1/chat/completions/batch", "/invocations"}
)


class ServerLoad:
    """ASGI middleware: `state.server_load` counts the requests to LOAD_TRACKED_PATHS being answered."""

    def __init__(self, app, state):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or route_path(scope) not in LOAD_TRACKED_PATHS:
            return await self.app(scope, receive, send)
        self.state.server_load += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.server_load -= 1


def route_path(scope) -> str:
    """The request's path without the --root-path prefix it may carry (vLLM's middleware reads it so)."""
    return scope["path"].removeprefix(scope.get("root_path", ""))
