"""Exit statuses shared by every command."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # plan: the model does not fit; diagnose: nothing recognised; bench: every request failed.
    NEGATIVE = 1
    USAGE = 2
    # serve: the engine could not start (e.g. the KV cache cannot hold one max_model_len sequence).
    STARTUP_FAILED = 3
    INTERRUPTED = 130
