"""Run the app under uvicorn; SIGINT / SIGTERM stop accepting, abort the running requests, and return."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

import uvicorn

from kvtool.engine.server.app import build_app
from kvtool.engine.server.serving import ServerSettings

LOG_FORMAT = "%(levelname)s %(asctime)s %(message)s"
GRACEFUL_SHUTDOWN_SECONDS = 10


class KvtoolServer(uvicorn.Server):
    """uvicorn.Server that aborts running requests on a signal and does not re-raise it afterwards."""

    def __init__(self, config: uvicorn.Config, on_signal):
        super().__init__(config)
        self.on_signal = on_signal
        self.loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets=None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig, frame) -> None:
        if self.should_exit:
            return  # a repeated signal: the shutdown under way is already bounded by its grace period
        super().handle_exit(sig, frame)
        if self.loop is not None:
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self.on_signal()))


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%m-%d %H:%M:%S"))
    logger = logging.getLogger("kvtool")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


async def serve_engine(engine, settings: ServerSettings, host: str, port: int, uds: str | None = None) -> None:
    """Serve on host:port, or on the unix socket `uds`, until a signal; the app's shutdown aborts what is left
    and stops the engine."""
    app = build_app(engine, settings)
    config = uvicorn.Config(
        app, host=host, port=port, uds=uds, log_level="info", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS
    )
    server = KvtoolServer(config, app.state.server.abort_all)
    await server.serve()
