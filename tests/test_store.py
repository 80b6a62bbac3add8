"""The store under concurrency, crashes, unreliable locks and hostile ownership."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv
from jobenv import store


def _job_env(tmp_path: Path, home: Path, i: int, writer: int) -> dict:
    """Job i (of a few), saved by `writer`: the record names its writer so we can tell which save won."""
    env = machines.slurm_cpu_only(tmp_path)
    env.update(SLURM_JOB_ID=f"50{i}", SLURM_JOBID=f"50{i}", SLURM_JOB_NAME=f"writer-{writer}")
    return base_env(home, env)


def test_concurrent_saves_and_gets(tmp_path, home):
    """64 saves (4 jobs x 16 writers) and 64 readers at once: every read is a whole record,
    and each job's last save survives."""
    jobs, writers = 4, 16
    for i in range(jobs):  # readers need something to read from the start
        jobenv(["save", "--quiet"], _job_env(tmp_path, home, i, -1), check=True)

    def save(n):
        i, w = n % jobs, n // jobs
        start = time.time()
        p = jobenv(["save", "--quiet"], _job_env(tmp_path, home, i, w))
        return i, w, start, time.time(), p.returncode, p.stderr

    def get(n):
        env = base_env(home)
        p = jobenv(["get", "--job", f"50{n % jobs}", "--allow-stale", "--shell", "bash"], env)
        return p.returncode, p.stdout, p.stderr

    with ThreadPoolExecutor(max_workers=32) as pool:
        saves = [pool.submit(save, n) for n in range(jobs * writers)]
        gets = [pool.submit(get, n) for n in range(64)]
        saves = [f.result() for f in saves]
        gets = [f.result() for f in gets]
    assert all(rc == 0 for *_, rc, _ in saves), [err for *_, rc, err in saves if rc]
    for rc, out, err in gets:
        assert rc == 0, err
        assert out.rstrip().endswith('"$@"; }') and "export NHOSTS=2" in out  # complete, never torn
    jobs_dir = home / ".jobenv" / "jobs"
    for i in range(jobs):
        rec, envfile = store.load_env(str(jobs_dir / f"slurm-50{i}.json"))
        writer = int(rec.jobname.split("-")[1])
        assert 0 <= writer < writers  # one of the concurrent saves, not the initial one
        # JSON and env file come from the same save: writers hold the job's lock for both
        assert f"export SLURM_JOB_NAME=writer-{writer}" in envfile
    assert not [f for f in os.listdir(jobs_dir) if "~tmp~" in f]


KILLER = r"""
import os, random, signal, sys, threading, time
sys.argv = ["jobenv", "save", "--quiet"]
delay = float(os.environ["KILL_AFTER"])
threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
from jobenv.__main__ import main
main()
time.sleep(5)  # never exit by ourselves: the kill must land somewhere in the save
"""


def test_sigkill_during_save_never_loses_the_previous_record(tmp_path, home):
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    path = home / ".jobenv" / "jobs" / "pbs-6000.pbs01.cluster.edu.json"
    rng = random.Random(7)
    killed_mid_write = 0
    for trial in range(100):
        delay = rng.uniform(0.0, 0.6)
        p = subprocess.run([sys.executable, "-c", KILLER], env={**env, "KILL_AFTER": f"{delay:.4f}"},
                           capture_output=True, timeout=60)
        assert p.returncode == -signal.SIGKILL
        data = json.loads(path.read_text())  # always a whole, valid record
        assert data["hosts"] == ["cn001", "cn002"] and data["jobid"] == "6000.pbs01.cluster.edu"
        killed_mid_write += any("~tmp~" in f for f in os.listdir(path.parent))
    # leftovers from killed writers are cleaned by the next save
    jobenv(["save", "--quiet"], env, check=True)
    assert not [f for f in os.listdir(path.parent) if "~tmp~" in f]
    assert jobenv(["get", "--allow-stale"], env).returncode == 0


def test_soft_lock_and_stale_lock_recovery(tmp_path, home):
    env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_LOCK": "soft", "JOBENV_LOCK_STALE": "1"}
    jobenv(["save", "--quiet"], env, check=True)
    lock = home / ".jobenv" / "jobs" / "pbs-6000.pbs01.cluster.edu.lock"
    lock.write_text("left by a writer that died on another node\n")
    old = time.time() - 5
    os.utime(lock, (old, old))
    t = time.time()
    jobenv(["save", "--quiet"], env, check=True)  # recovers the stale soft lock, does not wait
    assert time.time() - t < 30
    assert not lock.exists()


def test_records_owned_by_another_user_are_refused(tmp_path, home):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    path = next((home / ".jobenv" / "jobs").glob("*.json"))
    os.chown(path, 65534, 65534)
    p = jobenv(["get", "--job", "6000.pbs01.cluster.edu"], env)
    assert p.returncode == 6 and "owned by uid 65534" in p.stderr and "JOBENV_HOME" in p.stderr
    os.chown(path, 0, 0)
    os.chown(home / ".jobenv", 65534, 65534)
    p = jobenv(["get"], env)
    assert p.returncode == 6 and "store directory" in p.stderr


def test_clean_temps_judges_other_hosts_by_age_only(tmp_path):
    """A save on node B must not delete node A's temp file in flight (finding 5): pids are
    only meaningful on their own host."""
    from jobenv import atomic

    me = atomic.host_tag()
    mine = tmp_path / f".x.json~tmp~{me}~{os.getpid()}~abcd"
    dead = tmp_path / f".x.json~tmp~{me}~999999999~abcd"
    other = tmp_path / ".x.json~tmp~othernode~999999999~abcd"  # pid means nothing here
    old_other = tmp_path / ".y.json~tmp~othernode~1~abcd"
    for f in (mine, dead, other, old_other):
        f.write_text("")
    os.utime(old_other, (time.time() - 3600, time.time() - 3600))
    assert store.clean_temps(str(tmp_path)) == 2
    assert mine.exists() and other.exists() and not dead.exists() and not old_other.exists()


def test_key_for_is_safe_and_unique():
    assert store.key_for("pbs", "123.pbs01") == "pbs-123.pbs01"
    a, b = store.key_for("pbs", "123[3].pbs01"), store.key_for("pbs", "123_3_.pbs01")
    assert a != b and "/" not in a and "[" not in a
    assert "/" not in store.key_for("slurm", "../../etc/passwd")
