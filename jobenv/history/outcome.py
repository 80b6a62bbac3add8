"""A run summary's verdict read back (jobenv.history.runs' Run): outcome, cause and the first
failure as launch recorded them (jobenv.rank.verdict decided them once), every field checked
(run directories are hostile: the ranks write there); a version 1 summary, from before the
verdict was recorded, read by the rule of its day.
"""
from __future__ import annotations

from jobenv.history.fields import integer, text

TYPE_CHECKING = False  # `import typing` costs ~5 ms; launch imports run history on every run
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

# Version 1 summaries carry no outcome: the exit codes of a signal from outside (HUP, INT, USR1,
# USR2, PIPE, TERM) were read as interrupted.
V1_INTERRUPTED_EXITS = frozenset((129, 130, 138, 140, 141, 143))


def verdict(s: Dict[str, Any], has_summary: bool, code: Optional[int]) -> Tuple[str, str]:
    """(outcome, cause) as launch recorded them; for a run without a summary (the launch itself
    was killed before it could write one) ("interrupted", "none"); for a version 1 summary, by
    its day's rule."""
    from jobenv.rank.verdict import CAUSES, OUTCOMES

    if not has_summary:
        return "interrupted", "none"
    outcome, cause = s.get("outcome"), s.get("cause")
    if outcome in OUTCOMES and cause in CAUSES:
        return outcome, cause
    expired = s.get("expired") if s.get("expired") in ("timeout", "idle-timeout") else None
    if expired:
        return "interrupted", expired
    if s.get("interrupted") is True or code in V1_INTERRUPTED_EXITS:
        return "interrupted", "signal"
    return ("ok", "none") if code == 0 else ("failed", "rank" if isinstance(s.get("first_failure"), dict) else "launcher")


def first_failure(ff: Any) -> Optional[Dict[str, Any]]:
    """The summary's first failure, its fields checked: rank, host, how it ended (exit, signal,
    lost, vanished), exit and signal (numbers or None), description (version 1 kept only the
    words, in `exit`)."""
    if not isinstance(ff, dict):
        return None
    words = text(ff.get("description"), 256) or text(ff.get("exit"), 64)
    how = ff.get("how") if ff.get("how") in ("exit", "signal", "lost", "vanished") else None
    return {"rank": integer(ff.get("rank"), 0, 10**8) or 0, "host": text(ff.get("host"), 256), "how": how,
            "exit": integer(ff.get("exit"), -1000, 1000), "signal": integer(ff.get("signal"), 1, 128),
            "description": words}
