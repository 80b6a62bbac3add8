"""Errors that the CLI turns into one line on stderr and a documented exit code.

Every expected failure (bad input, missing record, ended job) is a JobenvError, so the
CLI never shows a traceback for it.  Exit codes are part of the user contract (README).
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1  # generic failure
EXIT_USAGE = 2  # bad command line (click's own code)
EXIT_NO_RECORD = 3  # no record, or unknown --job
EXIT_ENDED = 4  # the job has ended (use --allow-stale)
EXIT_BAD_INPUT = 5  # bad nodefile, hostlist, host name, profile
EXIT_BAD_RECORD = 6  # corrupt, foreign or future record; unsafe store


class JobenvError(Exception):
    """An expected failure with a user-facing message and an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class BadInput(JobenvError):
    exit_code = EXIT_BAD_INPUT


class NoRecord(JobenvError):
    exit_code = EXIT_NO_RECORD


class JobEnded(JobenvError):
    exit_code = EXIT_ENDED


class BadRecord(JobenvError):
    exit_code = EXIT_BAD_RECORD


def one_line(text: str) -> str:
    """Collapse a message to one printable line (host names may hold control bytes)."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch < " " or ch == "\x7f":
            out.append(repr(ch)[1:-1])
        else:
            out.append(ch)
    return "".join(out)
