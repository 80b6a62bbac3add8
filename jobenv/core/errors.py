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
EXIT_REMOTE = 7  # --remote: the remote cannot be reached, logged in to, or has no usable jobenv


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


class RemoteFailed(JobenvError):
    """`--remote`: ssh could not reach or log in to the remote, or found no jobenv there."""

    exit_code = EXIT_REMOTE


class BadRecord(JobenvError):
    """A record or store that cannot be used.  `kind`: "corrupt" (unreadable, invalid),
    "future" (a newer schema), "unsafe" (ownership, mode, symlink), "gone" (removed while
    being read); `rm` and `clean --corrupt` may delete the first two."""

    exit_code = EXIT_BAD_RECORD

    def __init__(self, message: str, exit_code: int | None = None, kind: str = "unsafe") -> None:
        super().__init__(message, exit_code)
        self.kind = kind


# Bidirectional overrides and isolates reorder what a terminal shows (CVE-2021-42574 style).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible(text: str) -> str:
    """`text` with everything a terminal would act on written as an escape: C0 and C1
    controls (ESC, CSI U+009B), DEL, bidi controls, and the surrogates that stand for
    undecodable bytes (shown as \\xNN).  Job ids and names come from the environment
    and records that others may have written: they are printed through this."""
    if text.isprintable():  # no control, format (bidi) or surrogate character: nothing to do
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif o < 0x20 or 0x7F <= o <= 0x9F or ch in _BIDI:
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
        elif 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif 0xD800 <= o <= 0xDFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: str) -> str:
    """Collapse a message to one printable line (host names may hold control bytes)."""
    return visible(text)


def report_error(exc: Exception) -> int:
    """Write an expected failure (a JobenvError, or an OSError such as an unreadable store)
    as the one line `jobenv: error: ...` on stderr; the exit code it documents (OSError: 1)."""
    import sys

    if isinstance(exc, JobenvError):
        sys.stderr.write(f"jobenv: error: {one_line(exc.message)}\n")
        return exc.exit_code
    sys.stderr.write(f"jobenv: error: {one_line(str(exc))}\n")
    return EXIT_ERROR
