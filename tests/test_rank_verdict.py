"""An attempt's verdict (jobenv.rank.verdict), decided once from the ranks' ledger state and what
the supervisor saw: each cause, its outcome and the launch's exit code."""
from __future__ import annotations

import pytest

from jobenv.rank.ledger import HostState, RankState, RunState
from jobenv.rank.verdict import decide, label
from launchkit import set_ending


def state(*rows, beats=None):
    """RunState from (rank, host, end, ended, clean) rows; end as the keeper writes it."""
    st = RunState()
    for rank, host, end, ended, clean in rows:
        r = st.ranks[rank] = RankState(rank)
        r.host, r.started, r.pid = host, 1.0, 100 + rank
        r.clean, r.clean_pid = clean, (100 + rank if clean else None)
        set_ending(r, end, ended)
        h = st.hosts.setdefault(host, HostState(host))
        h.ranks.append(rank)
        h.beat = (beats or {}).get(host, 50.0)
    return st


OK2 = [(0, "a", "exit:0", 5.0, False), (1, "a", "exit:0", 5.0, False)]


@pytest.mark.parametrize("rows,kw,want", [
    (OK2, {}, ("ok", "none", 0)),
    ([(0, "a", "exit:0", 5.0, False), (1, "a", "exit:3", 4.0, False)], {"launcher_exit": 1}, ("failed", "rank", 3)),
    ([(0, "a", "signal:15", 6.0, False), (1, "a", "signal:15", 4.0, False)], {"launcher_exit": 1},
     ("failed", "rank", 143)),  # a rank's own SIGTERM, with the launcher's stop of the other after it
    ([(0, "a", "exit:0", 5.0, False), (1, "a", "signal:9", 4.0, False)], {"launcher_exit": 9}, ("failed", "rank", 137)),
    ([(0, "a", "exit:0", 5.0, False), (1, "a", "lost", 4.0, False)], {"launcher_exit": 7}, ("failed", "rank", 7)),
    (OK2, {"launcher_exit": 255}, ("failed", "launcher", 255)),  # every rank fine: the launcher's own
    ([(0, "a", "signal:6", 5.0, True), (1, "a", "exit:0", 5.0, True)], {"launcher_exit": 134}, ("ok", "none", 0)),
    ([(0, "a", "signal:6", 5.0, False), (1, "a", "exit:0", 5.0, True)], {"launcher_exit": 134},
     ("failed", "rank", 134)),  # not clean: never excused
    ([(0, "a", None, None, False), (1, "a", None, None, False)], {"launcher_exit": 137, "expired": "timeout"},
     ("interrupted", "timeout", 124)),
    ([(0, "a", None, None, False)], {"launcher_exit": 137, "expired": "idle-timeout"}, ("interrupted", "idle-timeout", 124)),
    ([(0, "a", "signal:2", 5.0, False)], {"launcher_exit": 130, "signalled": 2}, ("interrupted", "signal", 130)),
    ([(0, "a", "signal:15", 5.0, False)], {"launcher_exit": 143, "signalled": 15}, ("interrupted", "signal", 143)),
    ([(0, "a", "exit:0", 5.0, False)], {"launcher_exit": 0, "preempted": 10}, ("interrupted", "preempted", 138)),
])
def test_each_cause_has_one_outcome_and_one_exit_code(rows, kw, want):
    nranks = len(rows)
    v = decide(state(*rows), nranks, kw.pop("launcher_exit", 0), **kw)
    assert (v.outcome, v.cause, v.exit_code) == want, v
    assert label(v.outcome, v.cause, v.exit_code, v.signal).split(":")[0] == v.outcome


def test_the_first_failure_is_picked_once_with_integers_and_the_rest_counted_as_stopped():
    st = state((0, "a", "signal:15", 6.0, False), (1, "a", "exit:3", 5.0, False), (2, "b", None, None, False),
               beats={"b": 5.5})
    v = decide(st, 3, 1)
    assert (v.first.rank, v.first.how, v.first.code, v.first.signal) == (1, "exit", 3, None)
    assert v.stopped == [0, 2] and v.failed_count() == 1 and st.ranks[2].how == "vanished"
    assert v.to_json()["first_failure"] == {"rank": 1, "host": "a", "how": "exit", "exit": 3, "signal": None,
                                            "status": 3, "at": 5.0, "description": "exit code 3"}


def test_a_host_whose_ranks_all_vanished_is_lost_and_a_limit_infers_nothing():
    rows = [(0, "a", "exit:0", 9.0, False), (1, "b", None, None, False), (2, "b", None, None, False)]
    v = decide(state(*rows, beats={"a": 9.0, "b": 3.0}), 3, 1)
    assert v.lost_hosts == ["b"] and v.first.how == "vanished" and v.exit_code == 1  # no code of its own
    at_limit = decide(state(*rows, beats={"a": 9.0, "b": 3.0}), 3, 137, expired="timeout")
    assert at_limit.first is None and at_limit.state.ranks[1].how is None  # the snapshot as it was
