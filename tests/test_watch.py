"""`jobenv watch` with real processes: heartbeat, job end by nodefile, and everything that
is *not* a job's end (a killed, stopped or interrupted watcher)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv
from fsutil import remount_ro, tmpfs


def rec(home: Path) -> dict:
    path = next((home / ".jobenv" / "jobs").glob("*.json"))
    return json.loads(path.read_text())


def pid_of(home: Path) -> int:
    return int(next((home / ".jobenv" / "jobs").glob("*.pid")).read_text().split()[0])


def wait_for(cond, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def _pbs(tmp_path, home):
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    env["JOBENV_HOSTNAME"] = "cn001"
    return env


def _state(env) -> str:
    return json.loads(jobenv(["list", "--json"], env, check=True).stdout)[0]["state"]


def test_second_start_is_a_noop_and_sigterm_is_not_the_jobs_end(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "1"], env, check=True)
    first = wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    pid = pid_of(home)
    p = jobenv(["watch", "--interval", "1"], env, check=True)
    assert p.stdout.startswith("already watching job 6000.pbs01.cluster.edu") and pid_of(home) == pid
    wait_for(lambda: rec(home)["status"]["heartbeat"] > first, 3, "heartbeat refreshed")
    assert jobenv(["get"], env).returncode == 0
    os.kill(pid, signal.SIGTERM)  # a user's kill, or the scheduler's: no evidence either way
    wait_for(lambda: "SIGTERM" in rec(home)["status"]["reason"], 5, "watcher noted its stop")
    assert rec(home)["status"]["state"] == "unknown" and "heartbeat" not in rec(home)["status"]
    assert jobenv(["get"], env).returncode == 0 and _state(env) == "unknown"
    wait_for(lambda: not list((home / ".jobenv" / "jobs").glob("*.pid")), 2, "pid file removed")


def test_vanished_nodefile_ends_the_job(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "1"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    os.unlink(env["PBS_NODEFILE"])  # PBS deletes it at job end
    wait_for(lambda: rec(home)["status"]["state"] == "ended", 3.0, "ended within two heartbeats")
    assert "nodefile" in rec(home)["status"]["reason"]


def test_killed_or_stopped_watcher_means_unknown_never_ended(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "0.3"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    assert _state(env) == "live"
    pid = pid_of(home)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(1.5)  # > 3 intervals of silence
    p = jobenv(["get"], env)
    assert p.returncode == 0, p.stderr  # silence is not the job's end
    assert _state(env) == "unknown"
    assert "nothing to clean" in jobenv(["clean"], env, check=True).stdout
    os.kill(pid, signal.SIGKILL)  # the node died: no goodbye
    time.sleep(0.3)
    assert jobenv(["get"], env).returncode == 0 and _state(env) == "unknown"
    assert "nothing to clean" in jobenv(["clean"], env, check=True).stdout
    assert list((home / ".jobenv" / "jobs").glob("*.json"))


def test_ctrl_c_on_foreground_watch_does_not_end_the_job(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    p = subprocess.Popen([sys.executable, "-m", "jobenv", "watch", "--foreground", "--interval", "0.3"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 10, "first heartbeat")
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 0
    assert rec(home)["status"]["state"] == "unknown" and "SIGINT" in rec(home)["status"]["reason"]
    assert jobenv(["get"], env).returncode == 0


def _watchers(home: Path) -> list:
    """Live `jobenv watch` processes of this store (by their environment)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if b"watch" in (d / "cmdline").read_bytes() and str(home).encode() in (d / "environ").read_bytes():
                if (d / "stat").read_text().split(")")[1].split()[0] != "Z":
                    out.append(int(d.name))
        except OSError:
            pass
    return out


def test_thirty_concurrent_starts_give_one_daemon(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    with ThreadPoolExecutor(max_workers=30) as pool:
        runs = list(pool.map(lambda _: jobenv(["watch", "--interval", "1"], env), range(30)))
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs if r.returncode]
    started = [r.stdout for r in runs if r.stdout.startswith("watching job")]
    assert len(started) == 1, started
    time.sleep(1.0)
    alive = _watchers(home)
    assert len(alive) == 1 and alive[0] == pid_of(home)
    os.kill(alive[0], signal.SIGTERM)


def _start_after(barrier, queue, path, env):
    from jobenv.store import watch

    barrier.wait()
    try:
        queue.put(watch.start(path, 1.0, env))
    except Exception as exc:  # reported, not raised: the parent counts
        queue.put(repr(exc))


@pytest.mark.slow  # thirty interpreters at once: ~60 s on 2 cores
def test_thirty_simultaneous_library_starts_give_one_daemon(tmp_path, home):
    """The same race without Python's start-up time to spread the callers out: 30 processes
    released by one barrier call watch.start at once."""
    import multiprocessing

    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    path = str(next((home / ".jobenv" / "jobs").glob("*.json")))
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(30), ctx.Queue()
    procs = [ctx.Process(target=_start_after, args=(barrier, queue, path, env)) for _ in range(30)]
    try:
        for p in procs:
            p.start()
        results = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(60)
        pids = [r for r in results if isinstance(r, int)]
        assert len(pids) == 1 and results.count(None) == 29, results
        time.sleep(1.0)
        assert len(_daemons_of_this_test(home)) == 1
    finally:
        for pid in _daemons_of_this_test(home):
            os.kill(pid, signal.SIGTERM)


def _daemons_of_this_test(home: Path) -> list:
    """Live processes forked from this pytest process and detached (watch daemons) whose output
    goes to a watch log under HOME: a sibling xdist worker, or another run's pytest, has the
    same command line but never that output."""
    me = Path("/proc/self/cmdline").read_bytes()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if (d / "cmdline").read_bytes() == me:
                    fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                    log = os.readlink(d / "fd" / "1")
                    if fields[0] not in ("Z", "X") and int(fields[1]) != os.getpid() and \
                            log.startswith(f"{home}/") and log.endswith(".watch.log"):
                        out.append(int(d.name))
            except (OSError, ValueError):
                pass
    return out


def test_interval_must_be_finite(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    for bad in ("nan", "inf", "-inf", "0", "1e9"):
        p = jobenv(["watch", "--interval", bad], env)
        assert p.returncode == 2 and "--interval" in p.stderr, (bad, p.stderr)
        p = jobenv(["save", "--quiet", "--watch", "--watch-interval", bad], env)
        assert p.returncode == 2, (bad, p.stderr)
    assert not _watchers(home)


def test_read_only_store_is_an_error_not_a_pid(tmp_path, home):
    mnt = tmp_path / "mnt"
    with tmpfs(mnt, "4m"):
        os.chmod(mnt, 0o700)
        env = {**_pbs(tmp_path, home), "JOBENV_HOME": str(mnt / "store")}
        jobenv(["save", "--quiet"], env, check=True)
        remount_ro(mnt)
        p = jobenv(["watch", "--interval", "1"], env)
        assert p.returncode != 0 and "pid" not in p.stdout
        assert p.stderr.startswith("jobenv: error:") and "writable directory" in p.stderr, p.stderr
        p = jobenv(["save", "--quiet"], env)
        assert p.returncode != 0 and "set JOBENV_HOME to a writable directory" in p.stderr, p.stderr


def test_relative_nodefile_is_made_absolute(tmp_path, home):
    env = _pbs(tmp_path, home)
    nodefile = Path(env["PBS_NODEFILE"])
    env["PBS_NODEFILE"] = os.path.relpath(nodefile, tmp_path)
    p = subprocess.run([sys.executable, "-m", "jobenv", "save", "--quiet"], env=env, cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = rec(home)
    assert r["status"]["nodefile"] == str(nodefile) and r["env"]["PBS_NODEFILE"] == str(nodefile)
    jobenv(["watch", "--interval", "0.3"], env, check=True)  # run from another directory
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    time.sleep(1.0)
    assert rec(home)["status"]["state"] == "live"
    os.kill(pid_of(home), signal.SIGTERM)


def test_resave_during_watch_is_not_overwritten(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "0.2"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    jobenv(["save", "--quiet", "--ranks-per-host", "2"], env, check=True)
    time.sleep(0.6)
    r = rec(home)
    assert r["ranks_per_host"] == 2
    os.kill(pid_of(home), signal.SIGTERM)


def test_watcher_on_another_node_ignores_the_nodefile(tmp_path, home):
    """The nodefile lives on the node that saved the record only: elsewhere its absence is no news."""
    env = _pbs(tmp_path, home)  # saved on cn001
    jobenv(["save", "--quiet"], env, check=True)
    os.unlink(env["PBS_NODEFILE"])
    jobenv(["watch", "--interval", "0.3"], {**env, "JOBENV_HOSTNAME": "cn002"}, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    time.sleep(1.0)
    assert rec(home)["status"]["state"] == "live"
    os.kill(pid_of(home), signal.SIGTERM)
