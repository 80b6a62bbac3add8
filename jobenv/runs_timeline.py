"""A run's per-rank start-up timeline, as data, and as the compact text chart of `jobenv runs show`.

The phases come from `phases.json` when the program reported them (the selftest: launch,
interpreter, imports, rendezvous, first collective, first step), else from the rank
records that jobenv.launch.ranks.read gives (launch -> the rank's wrapper started -> it
ended).  Both are hostile input: only numbers in range and short strings are kept.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from .numparse import plural
from .runs import MAX_PHASES_BYTES, PHASES, STARTUP, Run, num, read_json, text

MAX_ROWS = 1_000_000
RECORD_PHASES = ("launch", "running")  # from rank records: start-up of the wrapper, then the program
COLOURS = {"launch": "#8da0cb", "interpreter": "#66c2a5", "imports": "#fc8d62", "rendezvous": "#e78ac3",
           "first_collective": "#a6d854", "first_step": "#ffd92f", "running": "#b3b3b3"}
TEXT_ROWS = 24  # ranks drawn in the terminal chart (the slowest, when there are more)


class Row:
    """One rank: where it ran and how long each phase took, in order."""

    __slots__ = ("rank", "host", "phases")

    def __init__(self, rank: int, host: str, phases: List[Tuple[str, float]]) -> None:
        self.rank, self.host, self.phases = rank, host, phases

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
        got = [(n, num(e["phases"].get(n), 0, 1e7)) for n in STARTUP]
        rows[int(rank)] = Row(int(rank), text(e.get("host"), 255) or "?", [(n, s) for n, s in got if s is not None])
    return list(rows.values())


def from_records(run: Run) -> List[Row]:
    from .launch import ranks

    rows = []
    for r in ranks.read(run.path).ranks.values():
        if r.started is None:
            continue
        phases = [("launch", max(0.0, r.started - run.started))]
        if r.ended is not None:
            phases.append(("running", max(0.0, r.ended - r.started)))
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
    scale = width / max((r.total for r in rows), default=1.0) if rows else 1.0
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
