"""A run's timeline as data: what phases.json may hold (hostile: the ranks write it), which
ranks the terminal chart shows, and the per-phase table."""
from __future__ import annotations

import contextlib
import io
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from jobenv.history.runs import Run
from jobenv.history.html import heatmap, page
from jobenv.history.timeline import MAX_PHASE, STARTUP, Row, Timeline, from_phases, print_chart, shown_rows


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


# What a rank may write for a phase: every kind of JSON number and then some.
HOSTILE_SECONDS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**400, 10**400),
                            st.sampled_from([5e-324, -5e-324, 2.2250738585072014e-308, 1e-7, 4.9e-7, 5e-7, 1e7,
                                             1e7 + 1e-6, -0.0, True, None, "1", [1.0]]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"rank": st.integers(0, 5), "host": st.sampled_from(["a", "b"]),
                                       "phases": st.dictionaries(st.sampled_from(STARTUP), HOSTILE_SECONDS)}),
                max_size=6))
def test_no_phase_value_breaks_a_chart(entries):
    """Issue 24: a 5e-324 s phase divided the report by zero.  Whatever phases.json holds,
    the page, the heat map and the terminal chart come out, every SVG length a finite
    number, and every kept phase a whole number of microseconds in range."""
    tl = Timeline(from_phases({"ranks": entries}), "phases.json", STARTUP)
    for r in tl.rows:
        assert all(isinstance(s, float) and 0 <= s <= MAX_PHASE and s == round(s, 6) for _, s in r.phases)
    run = Run("local-x", "20260101-000000-1-a0", "/nonexistent", {"nranks": 4}, 0.0)
    html = page([run, run], [tl, tl])
    if tl.rows:
        html += heatmap(tl)
    for attr, value in re.findall(r' (x|y|x1|x2|y1|y2|cx|cy|width|height)="([^"]*)"', html):
        assert math.isfinite(float(value)), (attr, value)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        print_chart(tl)
    assert len(out.getvalue().splitlines()) == len(tl.rows) + 1
