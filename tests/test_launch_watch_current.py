"""jobenv.launch.watch.current: the newest live attempt of a job's launches, found from another
shell by the `supervisor` file of each run directory (a real process of this host, or a
fresh host-agent beat when the supervisor runs on another host)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from jobenv.core.errors import BadRecord, JobenvError
from jobenv.launch.watch import current

HERE = "thishost"


def attempt(runs, name: str, host: str, pid: int, epoch: float):
    d = runs / name
    d.mkdir(parents=True)
    (d / "supervisor").write_text(f"{host} {pid} {epoch}\n")
    return d


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_the_newest_live_attempt_wins(tmp_path, sleeper):
    runs = tmp_path / "runs"
    old = attempt(runs, "20261124-100000-11-a0", HERE, sleeper, 100.0)
    attempt(runs, "20261124-100005-11-a1", HERE, dead_pid(), 105.0)  # ended: its pid is gone
    attempt(runs, "20261124-100009-12-a0", "other.example", 1, 109.0)  # another host, no beat
    (runs / "20261124-100010-13-a0").mkdir()  # no supervisor file (an older jobenv's)
    env = {"JOBENV_HOSTNAME": HERE}
    assert current.find(str(runs), None, env, "job 7") == str(old)
    assert [os.path.basename(p) for p in current.attempts(str(runs))][:3] == [
        "20261124-100009-12-a0", "20261124-100005-11-a1", "20261124-100000-11-a0"]


def test_a_supervisor_on_another_host_is_live_while_a_beat_is_fresh(tmp_path):
    runs = tmp_path / "runs"
    d = attempt(runs, "20261124-100000-11-a10", "node7.cluster", dead_pid(), 100.0)
    beat = d / "host-node7.beat"
    beat.write_text("1\n")
    assert current.alive(str(d), "login1")
    assert not current.alive(str(d), "node7")  # its own host: the pid decides, and it is gone
    os.utime(beat, (time.time() - 60, time.time() - 60))
    assert not current.alive(str(d), "login1")


def test_none_live_or_a_bad_run_is_one_error(tmp_path):
    runs = tmp_path / "runs"
    attempt(runs, "20261124-100005-11-a1", HERE, dead_pid(), 105.0)
    with pytest.raises(JobenvError, match="no running launch of job 7"):
        current.find(str(runs), None, {"JOBENV_HOSTNAME": HERE}, "job 7")
    for bad in ("nope", "..", str(tmp_path / "missing")):
        with pytest.raises(JobenvError, match="no such run directory"):
            current.find(str(runs), bad, {}, "job 7")
    assert current.find(str(runs), "20261124-100005-11-a1", {}, "job 7").endswith("-a1")


def test_a_run_directory_not_the_users_own_is_refused(tmp_path, other_user, shared_tmp, sleeper):
    """Whether named by --run or found live, a run directory another user owns, one others
    may write, or a link to one of ours is refused (exit 6): its supervisor names a process
    to signal and it receives requests."""
    runs = tmp_path / "runs"
    mine = attempt(runs, "20261124-100000-11-a0", HERE, sleeper, 100.0)
    (tmp_path / "link").symlink_to(mine)
    theirs = shared_tmp / "20261124-100000-12-a0"
    other_user.sh(f"mkdir {theirs} && echo '{HERE} {sleeper} 9999999999.0' > {theirs}/supervisor")
    for run in (str(theirs), str(tmp_path / "link")):
        with pytest.raises(JobenvError, match="owned by uid|symbolic link|not a launch attempt of this job"):
            current.find(str(runs), run, {}, "job 7")
    mine.chmod(0o777)
    for run in (str(mine), None):
        with pytest.raises(BadRecord, match="writable by others"):
            current.find(str(runs), run, {"JOBENV_HOSTNAME": HERE}, "job 7")


def test_only_an_attempt_jobenv_made_is_accepted(tmp_path, sleeper):
    """`stacks --run DIR` and `kill --run DIR` write a `request` (and stacks/) into the directory:
    one of the user's own that is no attempt of the job (its notes, a checkout) is refused."""
    runs = tmp_path / "runs"
    attempt(runs, "20261124-100000-11-a0", HERE, sleeper, 100.0)
    for d in (tmp_path / "notes", runs / "notes", tmp_path / "20261124-100000-11-a0"):
        d.mkdir()
        (d / "supervisor").write_text(f"{HERE} {sleeper} 100.0\n")
        with pytest.raises(JobenvError, match="not a launch attempt of this job"):
            current.find(str(runs), str(d), {}, "job 7")
        assert sorted(p.name for p in d.iterdir()) == ["supervisor"]


def test_a_pid_of_another_users_process_is_not_our_launch(tmp_path):
    """The supervisor's pid, reused since by another user's process, exists but is not the launch
    (jobenv.core.pids.pid_alive(mine=True)); as root, kill(pid, 0) alone said it was."""
    if os.getuid() == 0:
        p = subprocess.Popen(["sleep", "60"], user=65534, group=65534, extra_groups=[])
        pid = p.pid
    elif os.stat("/proc/1").st_uid != os.getuid():
        p, pid = None, 1
    else:
        pytest.skip("no process of another user to point at")
    try:
        d = attempt(tmp_path / "runs", "20261124-100000-11-a0", HERE, pid, 100.0)
        assert not current.alive(str(d), HERE)
    finally:
        if p is not None:
            p.kill()
            p.wait()
