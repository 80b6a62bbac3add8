"""A run's timeline as data: what phases.json may hold (hostile: the ranks write it), which
ranks the terminal chart shows, and the per-phase table."""
from __future__ import annotations

from jobenv.runs_timeline import STARTUP, Row, Timeline, from_phases, shown_rows


def test_phases_keep_only_checked_fields_in_order():
    rows = from_phases({"ranks": [
        {"rank": 1, "host": "b\x1b[2J", "phases": {"imports": 2.0, "launch": 0.5, "bogus": 9, "rendezvous": -1}},
        {"rank": 0, "host": "a", "phases": {"first_step": True, "imports": float("nan"), "interpreter": 0.25}},
        {"rank": 1.5, "phases": {}}, {"rank": "2", "phases": {}}, {"rank": 3, "phases": []}, 7, None,
        {"rank": 0, "host": "a-again", "phases": {"imports": 1.0}},  # the last word on a rank wins
    ]})
    got = {r.rank: (r.host, r.phases) for r in rows}
    assert got == {1: ("b\\x1b[2J", [("launch", 0.5), ("imports", 2.0)]), 0: ("a-again", [("imports", 1.0)])}
    assert from_phases({"ranks": "all"}) == [] and from_phases({}) == []


def test_slowest_and_the_rows_a_terminal_shows():
    rows = [Row(r, f"h{r % 3}", [("launch", 0.1), ("imports", float(r % 7))]) for r in range(40)]
    tl = Timeline(rows, "test", STARTUP)
    assert tl.slowest is not None and tl.slowest.rank == 6  # 6, 13, 20, ... tie at 6.1 s: the lowest rank
    shown = shown_rows(tl, 10)
    assert len(shown) == 10 and all(r.startup >= 5.1 for r in shown)
    assert [(r.host, r.rank) for r in shown] == sorted((r.host, r.rank) for r in shown)
    table = {row[0]: row[1:] for row in tl.stats()}
    assert table["imports"] == ["0.000", "3.000", "6.000", "6", "h0"] and set(table) == {"launch", "imports"}
