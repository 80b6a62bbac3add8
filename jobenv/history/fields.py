"""Reading a field of a run directory's file as hostile input: a number in bounds (never a bool
or NaN), a printable string of bounded length; anything else reads as absent.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms; launch imports run history on every run
if TYPE_CHECKING:
    from typing import Any, Optional


def num(value: Any, low: float = 0.0, high: float = 1e10) -> Optional[float]:
    """A number in [low, high] (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if low <= value <= high else None


def text(value: Any, most: int = 4096) -> str:
    """A printable string of at most `most` characters ('' for anything else)."""
    from jobenv.core.errors import one_line

    return one_line(value)[:most] if isinstance(value, str) else ""


def integer(value: Any, low: int, high: int) -> Optional[int]:
    """A whole number in [low, high], else None."""
    got = num(value, low, high)
    return None if got is None or got != int(got) else int(got)
