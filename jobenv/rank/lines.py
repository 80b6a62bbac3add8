"""The one reader of ledger lines (formats: jobenv/rank/ledger.py's docstring), shared by the
supervisor's side (jobenv.rank.ledger) and the host agent (jobenv/rank/agent.py, which runs in
the keeper's isolated Python: so the standard library alone, and nothing at import).

A line that does not parse is None: the directory is shared with user code, so any line may be
half-written, forged or garbage, and none may raise.
"""

# words per line kind, the epoch last
WORDS = {"start": 7, "end": 4, "lost": 3, "ack": 4, "hook": 5, "clean": 3}
NUM_DIGITS = 9  # a rank, a pid or a request's seq
TICK_DIGITS = 20  # a start time in clock ticks after boot


def number(text: str, digits: int = NUM_DIGITS) -> "int | None":
    """ASCII digits only (int() takes '²' and '٣'), at most `digits` of them."""
    return int(text) if 0 < len(text) <= digits and text.isascii() and text.isdigit() else None


def parse(line: str) -> "tuple[str, int, list[str], float] | None":
    """(kind, rank or seq, the words between it and the epoch, epoch) of a well-formed line.
    start: [kpid, kstart, pid, pstart] (all numbers); end: [exit:N | signal:S]; hook: [pid, start];
    ack: [verb]."""
    words = line.split()
    if not words or WORDS.get(words[0]) != len(words):
        return None
    kind, num = words[0], number(words[1])
    try:
        when = float(words[-1])
    except ValueError:
        return None
    if num is None or when != when:  # NaN
        return None
    mid = words[2:-1]
    if kind in ("start", "hook") and not (all(number(w) is not None for w in mid[::2]) and
                                          all(number(w, TICK_DIGITS) is not None for w in mid[1::2])):
        return None
    if kind == "end" and not _status(mid[0]):
        return None
    return kind, num, mid, when


def _status(text: str) -> bool:
    kind, _, value = text.partition(":")
    return kind in ("exit", "signal") and number(value, 3) is not None
