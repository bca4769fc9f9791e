"""Errors that reach the user as one line: what is wrong and how to fix it."""


class KvtoolError(Exception):
    """A problem the user can fix. `str(err)` names the problem; `fix` says what to do."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} {self.fix}" if self.fix else self.message


class UsageError(KvtoolError, ValueError):
    """Bad input: an unknown model, a malformed file, a size or flag out of range (exit 2)."""


class InvalidRequestError(UsageError):
    """A request field out of range (vLLM's VLLMValidationError): HTTP 400 whose `param` names the field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param
