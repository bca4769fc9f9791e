"""How a request or the whole engine fails (vLLM v1's EngineGenerateError and EngineDeadError)."""

from kvtool.engine.sizing import messages as msg

# Failures after which the device or the process is in an unknown state: nothing can run any more.
_FATAL_NAMES = ("OutOfMemoryError", "AcceleratorError")
_FATAL_TEXT = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "HIP error")


class EngineGenerateError(Exception):
    """One request failed inside an engine step; the engine and the other requests go on (HTTP 500)."""


class EngineDeadError(Exception):
    """The engine cannot run any more requests (HTTP 500 for each; /health answers 503)."""

    CLIENT_MESSAGE = msg.ENGINE_DEAD_CLIENT


def is_engine_fatal(err: BaseException) -> bool:
    if isinstance(err, (MemoryError, EngineDeadError)) or type(err).__name__ in _FATAL_NAMES:
        return True
    return any(text in str(err) for text in _FATAL_TEXT)
