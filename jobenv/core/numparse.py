"""Numbers from hostile text: ASCII digits only, and the documented size limits.

Python's int() and float() accept surprising input: Unicode digits ('١٢'), underscores ('1_0' is 10),
signs and spaces; str.isdigit() accepts '²'; float() also takes 'nan', 'inf' and '1e300',
which spin a wait loop at 100 % CPU or overflow the C timeout of poll().  Every count and
duration jobenv reads from the command line, the environment, a nodefile or a record goes
through here, so one rule holds everywhere.
The limits are checked before anything is expanded, so a hostile hostlist or task count
fails in microseconds instead of exhausting memory.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput

# Documented in the README ("Limits"): more than any machine has, small enough to stay in memory.
MAX_HOSTS = 1_000_000
MAX_PER_HOST = 100_000  # ranks or GPUs per host
# Lines of a nodefile (one per MPI slot): more than any machine has cores (Fugaku: 7.6 million).
MAX_NODEFILE_LINES = 10_000_000
MAX_SECONDS = 366 * 86400  # a duration: longer than any allocation, far below poll()'s ~24.8-day
# (2**31 ms) C limit once a wait is split into steps no longer than that
_DIGITS = frozenset("0123456789")


def plural(n: int, noun: str, nouns: str = "") -> str:
    """`1 rank`, `2 ranks`: a count and its noun in agreement (`nouns` where it is not noun + 's');
    the counts jobenv prints go through here: no `1 ranks`, no `host(s)`."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def is_uint(text: str) -> bool:
    """True for a non-empty string of ASCII digits (no sign, space, '_' or Unicode digit)."""
    return bool(text) and _DIGITS.issuperset(text)


def parse_uint(text: str, what: str, maximum: int | None = None, minimum: int = 0) -> int:
    """The value of `text`, or BadInput naming `what`; at most 30 digits are ever converted."""
    if not is_uint(text) or len(text) > 30:
        raise BadInput(f"{what} must be a whole number written in ASCII digits, not {text!r}")
    n = int(text)
    if n < minimum:
        raise BadInput(f"{what} must be at least {minimum}, not {n}")
    if maximum is not None and n > maximum:
        raise BadInput(f"{what} is {n}, more than the limit of {maximum:,}")
    return n


_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def is_decimal(text: str) -> bool:
    """ASCII digits with at most one '.' and a digit after it (`30`, `0.5`, `.5`)."""
    whole, dot, frac = text.partition(".")
    return (is_uint(whole) or bool(dot and not whole)) and (not dot or is_uint(frac))


def _duration(text: str) -> float | None:
    """`text` in seconds: a plain number, or parts NUMBER+UNIT in the order w d h m s, each
    unit at most once (`90s`, `1m`, `2h`, `1h30m`, `1.5h`, `7d`); None when it is neither."""
    if is_decimal(text):
        return float(text)
    total, rest = 0.0, text
    for unit, scale in _UNITS:
        num, found, after = rest.partition(unit)
        if not found:
            continue
        if not is_decimal(num):
            return None
        total, rest = total + float(num) * scale, after
    return total if rest == "" and text else None


def parse_seconds(text: str, what: str, minimum: float = 0.0, maximum: float = MAX_SECONDS,
                  above: bool = False) -> float:
    """The one duration parser of every time option: seconds as `30`, `0.5`, `90s`, `1m`, `2h`,
    `1h30m`, `7d`, `1w` (ASCII digits, at most one '.' per part; no sign, exponent, nan, inf,
    space or '_'), from `minimum` (excluded when `above`) to `maximum`."""
    x = _duration(text) if len(text) <= 30 else None
    if x is None:
        raise BadInput(f"{what} must be a duration in ASCII digits like 30, 0.5, 90s, 1m, 2h or 1h30m, not {text!r}")
    if x < minimum or (above and x == minimum) or x > maximum:
        low = f"more than {minimum:g}" if above else f"at least {minimum:g}"
        raise BadInput(f"{what} must be {low} and at most {maximum:,.10g} seconds, not {text}")
    return x


def check_hosts(n: int, what: str) -> int:
    if n > MAX_HOSTS:
        raise BadInput(f"{what} has {n:,} hosts, more than jobenv's limit of {MAX_HOSTS:,}")
    return n


def is_finite(x: object) -> bool:
    """A real JSON number (not bool, not NaN/inf)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    if isinstance(x, int):
        return -10**18 < x < 10**18
    return x == x and x not in (float("inf"), float("-inf"))
