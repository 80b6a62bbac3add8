"""Where the store is and whether it is safe, checked like ssh checks ~/.ssh."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

import machines
from conftest import REPO, base_env, jobenv
from fsutil import remount_ro, tmpfs
from jobenv.store import cache as getcache


def test_relative_jobenv_home_is_made_absolute(tmp_path, home):
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    env["JOBENV_HOME"] = "rel/store"
    p = subprocess.run([sys.executable, "-m", "jobenv", "save", "--json"], env=env, cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["hostfile"].startswith(str(tmp_path / "rel" / "store" / "jobs") + "/")
    assert all(a.startswith("/") for a in rec["launch"] if a.endswith(".hosts"))
    env["JOBENV_HOME"] = str(tmp_path / "rel" / "store")  # the same store, from anywhere
    assert jobenv(["get", "--allow-stale"], env).returncode == 0


def test_missing_jobenv_home_is_created_private(tmp_path, home):
    store = tmp_path / "a" / "b" / "store"
    env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_HOME": str(store)}
    jobenv(["save", "--quiet"], env, check=True)
    for d in (tmp_path / "a", tmp_path / "a" / "b", store, store / "jobs"):
        assert (d.stat().st_mode & 0o777) == 0o700, d


def test_ancestor_writable_by_others_is_refused_unless_sticky(tmp_path, home):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone could rename our store away and put theirs there
    env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_HOME": str(shared / "me" / "store")}
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 6 and "writable by others and not sticky" in p.stderr and str(shared) in p.stderr
    assert not (shared / "me").exists()
    os.chmod(shared, 0o1777)  # like /tmp: others cannot rename what is ours
    jobenv(["save", "--quiet"], env, check=True)
    os.chmod(shared, 0o777)
    p = jobenv(["get"], env)  # readers check the path too
    assert p.returncode == 6 and "not sticky" in p.stderr


def test_ancestor_owned_by_another_user_is_refused(tmp_path, home):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_HOME": str(theirs / "store")}
    jobenv(["save", "--quiet"], env, check=True)
    os.chown(theirs, 65534, 65534)
    p = jobenv(["get"], env)
    assert p.returncode == 6 and "owned by uid 65534" in p.stderr


def test_read_only_home_says_what_to_do(tmp_path, home):
    mnt = tmp_path / "ro"
    with tmpfs(mnt, "1m"):
        os.chmod(mnt, 0o700)
        remount_ro(mnt)
        env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_HOME": str(mnt / "store")}
        p = jobenv(["save", "--quiet"], env)
        assert p.returncode == 1 and p.stderr.count("\n") == 1
        assert "set JOBENV_HOME to a writable directory" in p.stderr, p.stderr


def test_a_link_loop_above_the_store_is_one_line(tmp_path, home):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    env = {**base_env(home, machines.pbs_mpiprocs4(tmp_path)), "JOBENV_HOME": str(tmp_path / "a" / "store")}
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 6 and p.stderr.count("\n") == 1 and "symbolic links" in p.stderr, p.stderr


def _wrapper(bindir: Path) -> None:
    bindir.mkdir(exist_ok=True)
    w = bindir / "jobenv"
    w.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobenv \"$@\"\n")
    w.chmod(0o755)


def test_store_reached_through_another_users_symlink_runs_nothing_of_theirs(tmp_path, home, other_user, shared_tmp):
    """JOBENV_HOME=/tmp/<name>/.jobenv where another user planted /tmp/<name> as a link to a
    directory of yours: save and get refuse it (exit 6), so the restored PATH never starts
    with a directory reached through their link, which they could repoint once you use it."""
    bindir = tmp_path / "bin"
    _wrapper(bindir)
    target = tmp_path / "private"
    target.mkdir(mode=0o700)
    link = shared_tmp / "scratch"
    other_user.sh(f"ln -s {target} {link}")
    env = {"HOME": str(home), "JOBENV_HOME": f"{link}/.jobenv", "PYTHONPATH": str(REPO),
           "PATH": f"{bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", "JOBENV_HOSTNAME": "n1"}
    saved = jobenv(["save", "--quiet"], env)
    assert saved.returncode == 6 and saved.stderr.count("\n") == 1 and str(link) in saved.stderr, saved.stderr
    if saved.returncode == 0:  # (the hole: the store was accepted; arm the cached fast path too)
        os.mkdir(f"{link}/.jobenv/cache", 0o700)
        time.sleep(getcache.RACY + 0.3)
    marker = tmp_path / "PWNED"
    evil = shared_tmp / "evil"
    payload = f"#!/bin/sh\ntouch {marker}\n"
    swap = (f"mkdir -p {evil}/.jobenv/bin && printf '%s' '{payload}' > {evil}/.jobenv/bin/whoami && "
            f"chmod 755 {evil}/.jobenv/bin/whoami && ln -s {evil} {link}.new && mv -T {link}.new {link}")
    script = (f"source {REPO}/shell/jobenv.sh; getjobenv >/dev/null 2>&1; echo rc=$?; "
              f"setpriv --reuid={other_user.uid} --regid={other_user.gid} --clear-groups -- /bin/sh -c \"$SWAP\"; "
              f"whoami >/dev/null 2>&1; true")
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in {**env, "SWAP": swap}.items()],
                        "bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True, timeout=120)
    assert not marker.exists(), ("their whoami ran as you after getjobenv", p.stdout, p.stderr)
    assert p.stdout.strip() == "rc=6", p.stdout


def test_own_dir_of_a_relative_path_returns(tmp_path):
    """A relative path is taken from the cwd (dirname('') is '': a walk up must end at '/')."""
    code = ("from jobenv.store.paths import own_dir\ntry:\n    own_dir('rel-x/y')\nexcept Exception as e:\n"
            "    print(type(e).__name__)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (5, 5)))
    assert p.returncode == 0 and p.stdout == "", (p.returncode, p.stdout, p.stderr)  # SIGXCPU after 5 s of spinning
    assert (tmp_path / "rel-x" / "y").is_dir()

def test_a_store_found_missing_is_judged_again_when_it_appears(tmp_path):
    """The store is judged once per process, when opened; a missing one passes (nothing to
    read) but is not remembered as safe: one made meanwhile, writable by others, is refused."""
    from jobenv.store import files as store
    from jobenv.core.errors import BadRecord

    home = tmp_path / "store"
    jobs = home / "jobs"
    path = str(jobs / "local-x.json")
    with pytest.raises(BadRecord):
        store.load(path)  # gone: nothing there yet
    jobs.mkdir(parents=True)
    os.chmod(home, 0o700)
    os.chmod(jobs, 0o777)
    (jobs / "local-x.json").write_text("{}")
    os.chmod(jobs / "local-x.json", 0o600)
    with pytest.raises(BadRecord, match="writable by others"):
        store.load(path)
