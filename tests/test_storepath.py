"""Finding 13: where the store is and whether it is safe, checked like ssh checks ~/.ssh."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import machines
from conftest import base_env, jobenv
from fsutil import remount_ro, tmpfs


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


def test_a_store_found_missing_is_judged_again_when_it_appears(tmp_path):
    """The store is judged once per process, when opened; a missing one passes (nothing to
    read) but is not remembered as safe: one made meanwhile, writable by others, is refused."""
    from jobenv import store
    from jobenv.errors import BadRecord

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
