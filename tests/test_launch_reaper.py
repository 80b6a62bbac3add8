"""The reaper's signalling of a launch's marked processes."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from jobenv.launch import reaper


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
