"""The reaper's signalling of a launch's marked processes."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from jobenv.launch.watch import reaper
from test_rankwrap import HOST


def test_marked_processes_are_signalled_through_a_pidfd_never_by_number(tmp_path, monkeypatch):
    """The /proc scan finds pids; between the scan and the signal a pid can end and name
    another of the user's processes.  Each is pinned with a pidfd and signalled through it:
    `os.kill` by number is never used where pidfds exist."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open (Python < 3.9 or not Linux)")
    mark = b"JOBENV_RUN_DIR=" + os.fsencode(tmp_path)
    proc = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "JOBENV_RUN_DIR": str(tmp_path)})
    try:
        # the scan reads /proc/<pid>/environ: wait until it shows the child's (a CI run once
        # found no marked process right after Popen returned)
        deadline = time.monotonic() + 10
        while reaper.marked(mark) != [proc.pid] and time.monotonic() < deadline:
            time.sleep(0.01)

        def by_number(pid, sig):
            raise AssertionError(f"os.kill({pid}, {sig}): by number")

        monkeypatch.setattr(os, "kill", by_number)
        assert reaper.signal_marked(mark, signal.SIGTERM) == 1
        monkeypatch.undo()
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        monkeypatch.undo()
        proc.kill()
        proc.wait()


def test_the_reaper_spares_the_runs_host_agent_which_records_what_it_killed(tmp_path):
    """SIGKILL to every marked process (the reaper's last step, and what `jobenv kill` on one
    host of the test clusters, which share one /proc, did to every host's): the keepers die
    without an `end`, and the host agent, never reaped, writes their `lost` and ends by itself."""
    from test_rank_agent import every_rank_lost_then_the_agent_ends, ranks_in_groups
    from test_launch_watch_requests import _end

    run, procs = ranks_in_groups(tmp_path)
    try:
        agent = int((run / f"agent-{HOST}").read_text().split()[0])
        mark = reaper.marker(str(run))
        assert agent not in reaper.marked(mark) and len(reaper.marked(mark)) >= 4  # 2 keepers, 2 programs
        reaper.signal_marked(mark, signal.SIGKILL)
        for p in procs:
            p.wait(timeout=10)
        every_rank_lost_then_the_agent_ends(run)
    finally:
        _end(run, procs)
