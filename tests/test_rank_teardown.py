"""The exit-code policy for ranks that finished, then died in interpreter teardown (rank/teardown.py):
real `jobenv launch` with the MPICH wheel's mpiexec, real SIGABRT during finalization."""
from __future__ import annotations

import pytest

from jobenv.launch import ranks
from jobenv.rank import teardown
from launchkit import local_job, set_ending, shell

# a global whose __del__ runs while the interpreter finalizes, after every atexit callback
# (a second later: the other rank has finished too, as after a real run's last collective)
BOMB = "import os, sys, time\nclass Bomb:\n    def __del__(self):\n        time.sleep(1)\n        os.kill(os.getpid(), 6)\nbomb = Bomb()\n"


@pytest.fixture
def job(tmp_path):
    return local_job(tmp_path, 2)


@pytest.mark.e2e
def test_abort_after_a_clean_finish_is_a_warning_and_a_failure_stays_one(job, tmp_path):
    """An unhandled exception is never clean.  sys.exit(3) is: the hook wraps no builtin, and nothing
    an atexit callback can see tells a non-zero sys.exit from a clean end (the one case the excuse
    cannot tell; docs: hangs and teardown aborts)."""
    for name, ending, ok in (("fine", "print('last line', flush=True)", True), ("exit3", "sys.exit(3)", True),
                             ("raises", "raise ValueError('bad')", False)):
        (tmp_path / f"{name}.py").write_text(BOMB + ending + "\n")
        p = shell(job, f"jobenv launch -- python3 {tmp_path / name}.py")
        said = "finished (atexit ran), then ended during interpreter teardown: signal 6 (SIGABRT)"
        assert (p.returncode == 0) is ok and (said in p.stderr) is ok, (name, p.returncode, p.stderr)
    p = shell(job, f"jobenv launch --no-hook -- python3 {tmp_path / 'fine'}.py")
    assert p.returncode != 0, p.stderr  # without the hook nothing says the program finished


def _state(*rows):
    st = ranks.RunState()
    for i, (clean, exit) in enumerate(rows):
        r = st.ranks[i] = ranks.RankState(i)
        r.host, r.clean, r.pid, r.clean_pid = "vm", clean, 100 + i, 100 + i if clean else None
        set_ending(r, exit)
    return st


def test_excused_only_when_every_rank_finished_cleanly():
    assert teardown.excused(_state((True, "signal:6"), (True, "signal:9")), 2) is not None
    assert teardown.excused(_state((True, "signal:6"), (True, "exit:0"), (True, "lost")), 3) is not None
    assert teardown.excused(_state((True, "exit:0"), (True, "exit:0")), 2) is None  # nothing to excuse
    assert teardown.excused(_state((True, "signal:6"), (False, "signal:9")), 2) is None
    assert teardown.excused(_state((True, "signal:6"), (True, "exit:3")), 2) is None
    other = _state((True, "signal:11"))
    other.ranks[0].clean_pid = 99  # `python3 prep.py && exec ./solver`: prep was clean, the solver died
    assert teardown.excused(other, 1) is None
    assert teardown.excused(_state((True, "signal:6")), 2) is None  # rank 1 never recorded
    assert teardown.excused(_state((True, "signal:6"), (True, None)), 2) is not None  # killed with its wrapper
