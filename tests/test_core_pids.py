"""jobenv.core.pids.pid_alive, the one reader of "is this pid alive" (the store's temp files,
the staging copies, a launch's supervisor): real processes, our own and another user's."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from jobenv.core.pids import pid_alive

NOBODY = 65534


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_live_child_is_alive_and_ours_and_a_reaped_one_is_not():
    p = subprocess.Popen(["sleep", "60"])
    try:
        assert pid_alive(p.pid) and pid_alive(p.pid, mine=True)
    finally:
        p.kill()
        p.wait()
    assert not pid_alive(p.pid) and not pid_alive(p.pid, mine=True)
    assert not pid_alive(dead_pid())


@pytest.mark.parametrize("pid", [0, -1, "this process's group", 2**31, 2**64])
def test_no_single_process_has_these(pid):
    """kill(0, 0) and kill(-1, 0) ask about groups, which exist; too large a pid overflows.  (This
    process's group by name: a value of each xdist worker's own would make the workers collect
    different tests.)"""
    pid = -os.getpgrp() if pid == "this process's group" else pid
    assert not pid_alive(pid) and not pid_alive(pid, mine=True)


def test_another_users_process_is_alive_but_not_ours():
    """The documented answer for EPERM: the process exists (a temp file it writes is not
    removed), and it is not ours (not the launch a supervisor file named)."""
    if os.getuid() == 0:  # root may signal anyone: ask from an unprivileged process about ours
        code = ("import os, sys; from jobenv.core.pids import pid_alive; "
                "print(pid_alive(int(sys.argv[1])), pid_alive(int(sys.argv[1]), mine=True))")
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        p = subprocess.run([py, "-c", code, str(os.getpid())], env=env, capture_output=True, text=True,
                           user=NOBODY, group=NOBODY, extra_groups=[], timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == ["True", "False"]
        other = subprocess.Popen(["sleep", "60"], user=NOBODY, group=NOBODY, extra_groups=[])
        try:
            assert pid_alive(other.pid) and not pid_alive(other.pid, mine=True)
        finally:
            other.kill()
            other.wait()
    else:  # init is root's
        if os.stat("/proc/1").st_uid == os.getuid():
            pytest.skip("pid 1 is this user's here")
        assert pid_alive(1) and not pid_alive(1, mine=True)
