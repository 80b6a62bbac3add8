"""Failover decisions (jobenv.launch.verdict.failover): the hosts of each attempt with spares held back,
which host a failure retires (named or guessed), and the failures that are the program's own."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from jobenv.core.errors import BadInput
from jobenv.launch.verdict import failover
from jobenv.launch import ranks
from jobenv.launch.plan import sizing
from jobenv.launch.verdict.failover import Failure, judge
from jobenv.rank.ends import first_failure, infer_vanished
from jobenv.rank.verdict import Verdict
from launchkit import set_ending
from jobenv.launch.types import Request

NODES = ["node1", "node2", "node3", "node4"]


def state(*rows):
    """RunState from (rank, host, end, ended) rows (end: the keeper's "exit:N"/"signal:S", "lost",
    "vanished"); end None: still running."""
    st = ranks.RunState()
    for rank, host, end, ended in rows:
        r = st.ranks[rank] = ranks.RankState(rank)
        r.host, r.started = host, 1.0
        set_ending(r, end, ended)
    return st


def failure(st, lines, shared):
    """The Failure of an attempt whose verdict's first failure is `st`'s (nothing inferred)."""
    return Failure(Verdict("failed", "rank", 1, 1, len(st.ranks), st, first=first_failure(st)), lines, shared)


def hosts_of(h: failover.Hosts):
    return list(sizing.choose(NODES, 2, h.request, "7").hosts)


def test_spares_are_held_back_and_take_a_retired_hosts_place_in_order():
    h = failover.first_hosts(NODES, 2, Request(), 2, [], True, "7")
    assert hosts_of(h) == ["node1", "node2"] and h.nhosts == 2
    h = failover.replace(NODES, 2, h, "node2", "7")
    assert hosts_of(h) == ["node1", "node3"]
    h = failover.replace(NODES, 2, h, "node1.cluster", "7")  # a rank's FQDN names the job's host
    assert hosts_of(h) == ["node3", "node4"]
    assert failover.replace(NODES, 2, h, "node3", "7") is None  # no spare left: same hosts again
    assert failover.replace(NODES, 2, h, "elsewhere", "7") is None


def test_srun_is_told_the_nodelist_and_the_hosts_to_keep_off():
    h = failover.replace(NODES, 2, failover.first_hosts(NODES, 2, Request(), 1, [], True, "7"), "node2", "7")
    size = sizing.choose(NODES, 2, h.request, "7")
    argv, _ = sizing.render_sized(["srun", "-N", "{nhosts}"], size, 0, "7", {}, "/hf", "srun")
    assert argv == ["srun", "--nodelist=node[1,3-4]", "--exclude=node2", "-N", "3"]


def test_mpiexec_gets_the_attempts_hosts_in_its_hostfile():
    h = failover.replace(NODES, 2, failover.first_hosts(NODES, 2, Request(), 1, [], True, "7"), "node1", "7")
    size = sizing.choose(NODES, 2, h.request, "7")
    argv, text = sizing.render_sized(["mpiexec", "-n", "{nranks}"], size, 0, "7", {}, "/run/hostfile", "mpich")
    assert argv == ["mpiexec", "--hostfile", "/run/hostfile", "-n", "6"] and text == "node2\nnode3\nnode4\n"


def test_sizing_asked_for_decides_how_many_hosts_work():
    h = failover.first_hosts(NODES, 2, Request(nranks=4), 1, [], True, "7")
    assert hosts_of(h) == ["node1", "node2"]
    h = failover.first_hosts(NODES, 2, Request(nhosts=3, exclude="node1"), 0, [], True, "7")
    assert hosts_of(h) == ["node2", "node3", "node4"]
    assert failover.replace(NODES, 2, h, "node2", "7") is None  # --exclude-failed: no unused host left
    with pytest.raises(BadInput, match=r"--spare-nodes 2: job 7 has 4 host\(s\) to offer .*not 5 \(3 to run on"):
        failover.first_hosts(NODES, 2, Request(nhosts=3), 2, [], True, "7")
    with pytest.raises(BadInput, match="not 5"):
        failover.first_hosts(NODES, 2, Request(), 4, [], True, "7")


def test_retired_hosts_are_left_out_unless_hosts_names_them():
    h = failover.first_hosts(NODES, 2, Request(), 0, ["node2", "gone7"], False, "7")
    assert hosts_of(h) == ["node1", "node3", "node4"] and h.left_out == ["node2"]
    h = failover.first_hosts(NODES, 2, Request(hosts="node[1-2]"), 0, ["node2"], False, "7")
    assert hosts_of(h) == ["node1", "node2"] and h.left_out == []
    h = failover.first_hosts(NODES, 2, Request(exclude="node4"), 1, ["node1"], True, "7")
    assert hosts_of(h) == ["node2"] and h.left_out == ["node1"]
    with pytest.raises(BadInput, match=r"left out as retired: node\[1-2\]; `jobenv show` says why"):
        failover.first_hosts(NODES, 2, Request(nranks=8), 0, ["node1", "node2"], False, "7")


def test_a_signal_names_the_host_an_exit_code_guesses_it():
    v = judge(failure(state((0, "node1", "exit:0", 5.0), (3, "node2", "signal:9", 2.0), (2, "node2", "exit:1", 3.0)), {}, []))
    assert (v.host, v.rank, v.how, v.named, v.fault) == ("node2", 3, "signal 9 (SIGKILL)", True, "")
    v = judge(failure(state((1, "node2", "exit:4", 2.0), (0, "node1", "exit:1", 3.0)), {1: ["ECC error"]}, []))
    assert (v.host, v.rank, v.how, v.named) == ("node2", 1, "exit code 4", False)
    assert judge(failure(state((0, "node1", None, None)), {}, [])).host is None  # nothing failed


def test_a_vanished_rank_names_its_host_before_the_deaths_that_followed():
    st = state((0, "node1", "signal:9", 9.0))  # killed by the launcher after node3 went
    # as the run directory's reader gives the host agent's `lost` line: no exit, gone with its host
    st.ranks[2] = SimpleNamespace(rank=2, host="node3", started=1.0, how=None, code=None, signal=None, ended=None,
                                  failed=False, lost=True)
    v = judge(failure(st, {}, []))
    assert (v.host, v.rank, v.named) == ("node3", 2, True) and "heartbeat lost" in v.how


def test_a_host_whose_heartbeat_stopped_with_a_rank_running_is_named():
    st = state((0, "node1", "exit:1", 20.0), (1, "node2", None, None))
    st.hosts = {"node1": SimpleNamespace(beat=20.0, ranks=[0]), "node2": SimpleNamespace(beat=10.0, ranks=[1])}
    v = judge(failure(st, {}, []))
    assert (v.host, v.rank, v.named) == ("node2", 1, True)
    st.hosts["node2"].beat = 18.0  # beating until moments ago: the exit code on node1 is the guess
    assert (judge(failure(st, {}, [])).host, judge(failure(st, {}, [])).named) == ("node1", False)



def test_a_silent_host_is_named_before_the_lost_ranks_its_loss_made_elsewhere():
    """Hydra after a lost host (the real PBS, tests/test_resilience_pbs.py): node1's keepers were
    killed by SIGKILL to their groups and node1's agent, alive, wrote their `lost` two beats
    later; node2 went silent (its ranks vanished at its last beat).  node2 is retired."""
    st = state((0, "node1", "lost", 12.6), (1, "node1", "lost", 12.6), (2, "node2", None, None),
               (3, "node2", None, None))
    st.hosts = {"node1": SimpleNamespace(beat=12.6, ranks=[0, 1]), "node2": SimpleNamespace(beat=11.2, ranks=[2, 3])}
    infer_vanished(st)  # the launch is over: what the launch's verdict reads
    v = judge(failure(st, {}, []))
    assert (v.host, v.rank, v.named) == ("node2", 2, True) and "heartbeat lost" in v.how

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>']


@pytest.mark.parametrize("last, fault", [
    (["OSError: [Errno 28] No space left on device: '/ckpt/step-9.pt'"], "no space left"),
    (["ModuleNotFoundError: No module named 'apex'"], "import error"),
    (["ImportError: libcudart.so.12: cannot open shared object file"], "import error"),
    (['    x = = 1', "SyntaxError: invalid syntax"], "syntax error"),
])
def test_the_programs_own_failures_retire_no_host(last, fault):
    st = state((0, "node1", "exit:1", 2.0), (1, "node1", "signal:9", 3.0))
    for lines, shared in (({0: TRACE + last}, []), ({}, ["1: hello"] + TRACE + last)):  # per rank, or all output
        v = judge(failure(st, lines, shared))
        assert v.host is None and v.fault == fault and v.why, (lines, shared)


def test_usage_exit_2_retires_no_host():
    v = judge(failure(state((0, "node2", "exit:2", 1.0), (1, "node1", "signal:15", 2.0)), {}, ["usage: train.py"]))
    assert v.host is None and v.fault == "usage (exit 2)"


def test_the_same_exception_on_ranks_of_two_hosts_is_the_programs():
    st = state((0, "node1", "exit:1", 2.0), (2, "node2", "exit:1", 2.5))
    same = {0: TRACE + ["ValueError: loss is nan"], 2: ["[2] ValueError: loss is nan"]}
    assert judge(failure(st, same, [])).fault == "same exception on every failed rank"
    other = {0: TRACE + ["ValueError: loss is nan"], 2: TRACE + ["RuntimeError: CUDA error: ECC error"]}
    assert judge(failure(st, other, [])).host == "node1"
    one_host = state((0, "node1", "exit:1", 2.0), (1, "node1", "exit:1", 2.5))  # a host's GPU fails both its ranks alike
    ecc = ["RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    assert judge(failure(one_host, {0: ecc, 1: ecc}, [])).host == "node1"


def test_the_rule_is_one_table_with_a_reason_per_row():
    names = [name for name, _, _, _ in failover.PROGRAM_FAULTS]
    assert len(set(names)) == len(names) == 5 and all(why for _, _, why, _ in failover.PROGRAM_FAULTS)
    assert [name for name, _, _, retry in failover.PROGRAM_FAULTS if not retry] == \
        ["import error", "syntax error", "usage (exit 2)"]


def test_restart_count_adds_the_runs_before():
    assert failover.restart_count(0, 0) == 0 and failover.restart_count(2, 0) == 2
    assert failover.restart_count(1, 3) == 4
