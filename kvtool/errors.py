"""Errors that reach the user as one line, and the exit status each one carries."""

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses shared by every command (documented in the README)."""

    OK = 0
    # plan: the model does not fit; diagnose: nothing recognised; bench: every request failed.
    NEGATIVE = 1
    USAGE = 2
    # serve: the engine could not start (e.g. the KV cache cannot hold one max_model_len sequence).
    STARTUP_FAILED = 3
    # an unexpected exception: a fault in kvtool, not in the input (EX_SOFTWARE in sysexits.h)
    INTERNAL_ERROR = 70
    INTERRUPTED = 130


class KvtoolError(Exception):
    """A problem the user can fix. `str(err)` names the problem; `fix` says what to do."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} {self.fix}" if self.fix else self.message


class UsageError(KvtoolError, ValueError):
    """Bad input: an unknown model, a malformed file, a size or flag out of range."""


class StartupError(KvtoolError):
    """The engine cannot start with these settings (memory, context length, devices)."""

    exit_code = ExitCode.STARTUP_FAILED


class NegativeResult(KvtoolError):
    """The command ran, and its answer is no: e.g. every benchmark request failed."""

    exit_code = ExitCode.NEGATIVE


class InvalidRequestError(UsageError):
    """A request field out of range (vLLM's VLLMValidationError): HTTP 400 whose `param` names the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param
