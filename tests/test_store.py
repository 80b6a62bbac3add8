"""The store under concurrency, crashes, unreliable locks and hostile ownership."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import fsutil
import machines
from conftest import base_env, jobenv
from jobenv.store import files as store


def load_env(json_path: str, tries: int = 5) -> tuple:
    """A reader of a record and the env file of the same save (users source the env file;
    jobenv itself reads only the record): if a newer save replaced the files between the
    two reads, read both again."""
    for _ in range(tries):
        rec = store.load(json_path)
        name = rec.env_file or os.path.basename(json_path)[:-len(".json")] + ".env"
        try:
            return rec, (Path(json_path).parent / name).read_text("utf-8", "surrogateescape")
        except FileNotFoundError:
            continue
    raise AssertionError(f"{json_path}: its env file keeps vanishing")



def _job_env(tmp_path: Path, home: Path, i: int, writer: int) -> dict:
    """Job i (of a few), saved by `writer`: the record names its writer so we can tell which save won."""
    env = machines.slurm_cpu_only(tmp_path)
    env.update(SLURM_JOB_ID=f"50{i}", SLURM_JOBID=f"50{i}", SLURM_JOB_NAME=f"writer-{writer}")
    return base_env(home, env)


@pytest.mark.slow  # stress: concurrent writers and readers
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
        assert out.rstrip().endswith('"$@"; }') and "\nNHOSTS='2'\n" in out  # complete, never torn
    jobs_dir = home / ".jobenv" / "jobs"
    for i in range(jobs):
        rec, envfile = load_env(str(jobs_dir / f"slurm-50{i}.json"))
        writer = int(rec.jobname.split("-")[1])
        assert 0 <= writer < writers  # one of the concurrent saves, not the initial one
        # JSON and env file come from the same save: writers hold the job's lock for both
        assert f"SLURM_JOB_NAME='writer-{writer}'" in envfile, envfile
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


def consistent(json_path: Path) -> tuple:
    """What a reader sees: the record, and the env file and hostfile it names, all from one
    save (NHOSTS, the job name and the host list agree across the three)."""
    from jobenv.restore.shell import quote

    rec, env_text = load_env(str(json_path))
    hosts = Path(rec.hostfile).read_text().split()
    assert hosts == rec.hosts, (hosts, rec.hosts)
    assert f"NHOSTS={quote(str(len(rec.hosts)))}\n" in env_text, env_text
    assert f"PBS_JOBNAME={quote(rec.jobname)}\n" in env_text
    assert f"HOSTFILE={quote(rec.hostfile)}\n" in env_text
    return rec.jobname, len(rec.hosts)


def _vary(env: dict, trial: int) -> dict:
    """Saves that differ (job name and host count) so a mixed file set would show."""
    n = 2 + trial % 3
    Path(env["PBS_NODEFILE"]).write_text("".join(f"cn{h:03d}\n" for h in range(1, n + 1)))
    return {**env, "PBS_JOBNAME": f"trial{trial}"}


@pytest.mark.slow  # stress: random SIGKILLs, timing-sensitive under load
def test_sigkill_anywhere_in_save_leaves_one_whole_save(tmp_path, home):
    """Random SIGKILLs during saves that differ; after each one a reader gets the
    record, env file and hostfile of one save, never a mix (and never nothing)."""
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    jobenv(["save", "--quiet"], _vary(env, 0), check=True)
    path = home / ".jobenv" / "jobs" / "pbs-6000.pbs01.cluster.edu.json"
    rng = random.Random(7)
    seen = set()
    for trial in range(1, 81):
        delay = rng.uniform(0.0, 0.5)
        p = subprocess.run([sys.executable, "-c", KILLER], env={**_vary(env, trial), "KILL_AFTER": f"{delay:.4f}"},
                           capture_output=True, timeout=60)
        assert p.returncode == -signal.SIGKILL
        seen.add(consistent(path))
    assert len(seen) > 2  # some saves committed, and the kills landed at different points
    # leftovers from killed writers are cleaned by the next save
    jobenv(["save", "--quiet"], env, check=True)
    assert not [f for f in os.listdir(path.parent) if "~tmp~" in f]
    assert jobenv(["get", "--allow-stale"], env).returncode == 0


@pytest.mark.slow  # stress: ENOSPC at every point
def test_enospc_at_any_point_keeps_the_previous_save(tmp_path, home):
    """A save that runs out of space (at the hostfile, the env file or the JSON)
    fails with one line and leaves the previous save whole (NHOSTS=2 everywhere)."""
    from fsutil import tmpfs

    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    big = tmp_path / "big-nodefile"
    big.write_text("".join(f"x{h // 1000:04d}c0s{h % 1000:03d}b0n0.hsn.example.org\n" for h in range(3000)))
    outcomes = set()
    for size_kib in (40, 80, 120, 160, 200, 240, 280, 320, 400, 600):
        mnt = tmp_path / f"fs{size_kib}"
        with tmpfs(mnt, f"{size_kib}k"):
            os.chmod(mnt, 0o700)
            fenv = {**env, "JOBENV_HOME": str(mnt / "store")}
            jobenv(["save", "--quiet"], fenv, check=True)
            path = mnt / "store" / "jobs" / "pbs-6000.pbs01.cluster.edu.json"
            p = jobenv(["save", "--quiet"], {**fenv, "PBS_NODEFILE": str(big), "PBS_JOBNAME": "big"})
            name, nhosts = consistent(path)
            if p.returncode:
                assert p.stderr.count("\n") == 1 and p.stderr.startswith("jobenv: error:"), p.stderr
                assert "No space left" in p.stderr and nhosts == 2 and name == "train.sh"
            else:
                assert nhosts == 3000 and name == "big"
            assert not [f for f in os.listdir(path.parent) if "~tmp~" in f]
            outcomes.add((p.returncode == 0, len(os.listdir(path.parent))))
    assert {ok for ok, _ in outcomes} == {True, False}


@pytest.mark.slow  # stress: save racing rm
def test_save_racing_rm_leaves_all_or_nothing(tmp_path, home):
    """`save` and `rm` of one job at once: afterwards either no file of the job,
    or a record with all its files (rm takes the job's lock)."""
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    d = home / ".jobenv" / "jobs"
    path = d / "pbs-6000.pbs01.cluster.edu.json"
    both = 0
    for trial in range(40):
        if not path.exists():
            jobenv(["save", "--quiet"], env, check=True)
        with ThreadPoolExecutor(max_workers=2) as pool:
            s = pool.submit(jobenv, ["save", "--quiet"], _vary(env, trial))
            r = pool.submit(jobenv, ["rm", "6000.pbs01.cluster.edu"], env)
            s, r = s.result(), r.result()
        assert s.returncode == 0, s.stderr
        left = sorted(f for f in os.listdir(d) if not f.endswith(".lock"))
        if path.exists():
            consistent(path)
            both += 1
        else:
            assert left == [], left
    assert 0 < both < 40 or both == 40  # interleavings vary; every outcome was whole


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
    """A save on node B must not delete node A's temp file in flight: pids are
    only meaningful on their own host."""
    from jobenv.core import atomic

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


def test_a_fifo_in_the_store_is_refused_not_waited_on(tmp_path, home):
    """A record that is a FIFO (JOBENV_RECORD may name any path): get, list and
    detect() refuse it at once, and a new save replaces it (all under `timeout`)."""
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    jobs = home / ".jobenv" / "jobs"
    path = next(p for p in jobs.iterdir() if p.suffix == ".json")
    path.unlink()
    os.mkfifo(path, 0o600)
    p = fsutil.jobenv_within(20, ["get", "--job", "6000.pbs01.cluster.edu"], env)
    assert p.returncode == 6 and p.stderr.count("\n") == 1 and "not a regular file" in p.stderr, p.stderr
    fsutil.jobenv_within(20, ["list"], env)
    code = "import jobenv.runtime as r\ntry:\n    r.detect()\nexcept r.DetectError as e:\n    print(e)\n"
    q = subprocess.run(["timeout", "-s", "KILL", "20", sys.executable, "-c", code], capture_output=True, text=True,
                       env={**env, "JOBENV_RECORD": str(path), "PMI_RANK": "0", "PMI_SIZE": "2"})
    assert q.returncode == 0 and "is a FIFO, not a regular file" in q.stdout, (q.returncode, q.stdout, q.stderr)
    p = fsutil.jobenv_within(20, ["save", "--quiet"], env)
    assert p.returncode == 0, p.stderr
    assert fsutil.jobenv_within(20, ["get", "--job", "6000.pbs01.cluster.edu"], env).returncode == 0
