"""A run's per-rank start-up timeline, as data, and as the compact text chart of `jobenv runs show`.

The phases come from `phases.json` when the program reported them (the selftest: launch,
interpreter, imports, rendezvous, first collective, first step), else from the rank
records that jobenv.rank.ledger.read gives (launch -> the rank's wrapper started -> it
ended).  Both are hostile input: only numbers in range and short strings are kept, and a
Row keeps a phase only as `seconds` makes it (0 to 1e7 s in whole microseconds), so that
every length the charts divide by is 0 or at least RESOLUTION: no NaN, infinity, negative
or subnormal duration (5e-324 s) reaches a scale or an axis.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from jobenv.core.numparse import plural
from jobenv.history.fields import num, text
from jobenv.history.runs import MAX_PHASES_BYTES, PHASES, STARTUP, Run, read_json

MAX_ROWS = 1_000_000
RECORD_PHASES = ("launch", "running")  # from rank records: start-up of the wrapper, then the program
COLOURS = {"launch": "#8da0cb", "interpreter": "#66c2a5", "imports": "#fc8d62", "rendezvous": "#e78ac3",
           "first_collective": "#a6d854", "first_step": "#ffd92f", "running": "#b3b3b3"}
TEXT_ROWS = 24  # ranks drawn in the terminal chart (the slowest, when there are more)
RESOLUTION = 1e-6  # seconds: a phase is kept in whole microseconds
MAX_PHASE = 1e7  # seconds (115 days): longer is no start-up phase


def seconds(value: Any) -> Optional[float]:
    """A phase's duration as the charts draw it: a number from 0 to MAX_PHASE rounded to the
    microsecond, else None (NaN, infinity, negative, not a number)."""
    s = num(value, 0.0, MAX_PHASE)
    return None if s is None else round(s, 6)


def per_second(width: float, longest: float) -> float:
    """Chart units per second for bars whose longest is `longest` seconds (0: nothing to scale)."""
    return width / longest if longest >= RESOLUTION else 0.0


class Row:
    """One rank: where it ran and how long each phase took, in order."""

    __slots__ = ("rank", "host", "phases")

    def __init__(self, rank: int, host: str, phases: Sequence[Tuple[str, Any]]) -> None:
        self.rank, self.host = rank, host
        kept = [(n, seconds(v)) for n, v in phases]
        self.phases: List[Tuple[str, float]] = [(n, v) for n, v in kept if v is not None]

    @property
    def total(self) -> float:
        return sum(s for _, s in self.phases)

    @property
    def startup(self) -> float:
        """Seconds until the rank's program was up (every phase but `running`)."""
        return sum(s for n, s in self.phases if n != "running")


class Timeline:
    """Rows sorted by host then rank; `source` says where they came from; `names` the phases."""

    def __init__(self, rows: List[Row], source: str, names: Sequence[str]) -> None:
        self.rows = sorted(rows, key=lambda r: (r.host, r.rank))
        self.source, self.names = source, tuple(names)

    @property
    def slowest(self) -> Optional[Row]:
        return max(self.rows, key=lambda r: (r.startup, -r.rank)) if self.rows else None

    def hosts(self) -> Dict[str, List[Row]]:
        out: Dict[str, List[Row]] = {}
        for r in self.rows:
            out.setdefault(r.host, []).append(r)
        return out

    def stats(self) -> List[List[str]]:
        """Per phase: min, median, max, slowest rank, its host (the selftest's table)."""
        out = []
        for name in self.names:
            got = [(s, r) for r in self.rows for n, s in r.phases if n == name]
            if got:
                top, worst = max(got, key=lambda t: t[0])
                xs = [s for s, _ in got]
                out.append([name, f"{min(xs):.3f}", f"{statistics.median(xs):.3f}", f"{top:.3f}",
                            str(worst.rank), worst.host])
        return out


def from_phases(data: Dict[str, object]) -> List[Row]:
    entries = data.get("ranks")
    rows: Dict[int, Row] = {}
    for e in entries[:MAX_ROWS] if isinstance(entries, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("phases"), dict):
            continue
        rank = num(e.get("rank"), 0, 1e8)
        if rank is None or rank != int(rank):
            continue
        rows[int(rank)] = Row(int(rank), text(e.get("host"), 255) or "?", [(n, e["phases"].get(n)) for n in STARTUP])
    return list(rows.values())


def from_records(run: Run) -> List[Row]:
    from jobenv.rank.ledger import read

    rows = []
    for r in read(run.path).ranks.values():
        if r.started is None:
            continue
        phases = [("launch", r.started - run.started)]  # Row drops what is no duration
        if r.ended is not None:
            phases.append(("running", r.ended - r.started))
        rows.append(Row(r.rank, text(r.host, 255) or "?", phases))
    return rows


def timeline(run: Run) -> Timeline:
    """The run's rows: reported phases when there are any, else the rank records."""
    data = read_json(f"{run.path}/{PHASES}", MAX_PHASES_BYTES)
    rows = from_phases(data) if data is not None else []
    if rows:
        return Timeline(rows, "phases reported by the program (phases.json)", STARTUP)
    return Timeline(from_records(run), "rank records (wrapper start and end)", RECORD_PHASES)


def shown_rows(tl: Timeline, most: int) -> List[Row]:
    """At most `most` rows: all of them, else the slowest (in host, rank order)."""
    if len(tl.rows) <= most:
        return tl.rows
    keep = {id(r) for r in sorted(tl.rows, key=lambda r: r.startup, reverse=True)[:most]}
    return [r for r in tl.rows if id(r) in keep]


def print_chart(tl: Timeline, width: int = 48) -> None:
    """The compact chart on a terminal: one bar per rank, one colour per phase, slowest marked."""
    from rich.console import Console
    from rich.text import Text

    rows = shown_rows(tl, TEXT_ROWS)
    slow = tl.slowest
    scale = per_second(width, max((r.total for r in rows), default=0.0))
    con = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
    legend = Text("timeline  ")
    for name in tl.names:
        legend.append("\u2588 ", style=COLOURS[name])
        legend.append(f"{name}  ")
    con.print(legend)
    label = max((len(f"{r.host} {r.rank}") for r in rows), default=0)
    for r in rows:
        line = Text(f"{r.host} {r.rank}".ljust(label) + "  ")
        for name, s in r.phases:
            line.append("\u2588" * max(1 if s > 0 else 0, round(s * scale)), style=COLOURS[name])
        line.append(f" {r.startup:.3f} s" + ("  <- slowest start-up" if r is slow else ""),
                    style="bold red" if r is slow else "")
        con.print(line)
    if len(rows) < len(tl.rows):
        con.print(f"({len(rows)} slowest of {plural(len(tl.rows), 'rank')})")
