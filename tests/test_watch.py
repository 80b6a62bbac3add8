"""`jobenv watch` with real processes: heartbeat, job end by signal, nodefile or silence."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import machines
from conftest import base_env, jobenv


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


def test_second_start_is_a_noop_and_sigterm_ends_the_job(tmp_path, home):
    env = _pbs(tmp_path, home)
    p = jobenv(["save", "--quiet", "--watch", "--watch-interval", "1"], env, check=True)
    first = wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    pid = pid_of(home)
    p = jobenv(["watch", "--interval", "1"], env, check=True)
    assert p.stdout.startswith("already watching job 6000.pbs01.cluster.edu") and pid_of(home) == pid
    wait_for(lambda: rec(home)["status"]["heartbeat"] > first, 3, "heartbeat refreshed")
    assert jobenv(["get"], env).returncode == 0
    t = time.time()
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: rec(home)["status"]["state"] == "ended", 2.0, "ended within two heartbeats")
    assert time.time() - t <= 2.0
    assert "SIGTERM" in rec(home)["status"]["reason"]
    p = jobenv(["get"], env)
    assert p.returncode == 4 and "SIGTERM" in p.stderr
    wait_for(lambda: not list((home / ".jobenv" / "jobs").glob("*.pid")), 2, "pid file removed")


def test_vanished_nodefile_ends_the_job(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "1"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    os.unlink(env["PBS_NODEFILE"])  # PBS deletes it at job end
    wait_for(lambda: rec(home)["status"]["state"] == "ended", 2.0, "ended within two heartbeats")
    assert "nodefile" in rec(home)["status"]["reason"]


def test_silent_heartbeat_means_unknown_without_scheduler_cli(tmp_path, home):
    """Issue 8, finding 8: a SIGKILLed watcher says nothing about the job; only scheduler
    evidence or the job's own end ends it, so `get` restores and `clean` keeps the record."""
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "0.3"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    listed = json.loads(jobenv(["list", "--json"], env, check=True).stdout)
    assert listed[0]["state"] == "live" and "heartbeat" in listed[0]["reason"]
    os.kill(pid_of(home), signal.SIGKILL)  # the node died: no goodbye
    time.sleep(1.2)  # > 3 intervals
    p = jobenv(["get", "--shell", "bash"], env)
    assert p.returncode == 0 and "unknown (no heartbeat" in p.stdout
    listed = json.loads(jobenv(["list", "--json"], env, check=True).stdout)
    assert listed[0]["state"] == "unknown"
    assert "removed job" not in jobenv(["clean"], env, check=True).stdout


def test_resave_during_watch_is_not_overwritten(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet", "--watch", "--watch-interval", "0.2"], env, check=True)
    wait_for(lambda: rec(home)["status"].get("heartbeat"), 5, "first heartbeat")
    jobenv(["save", "--quiet", "--ranks-per-host", "2"], env, check=True)
    time.sleep(0.6)
    r = rec(home)
    assert r["ranks_per_host"] == 2
    os.kill(pid_of(home), signal.SIGTERM)


def test_clean_older_than(tmp_path, home):
    env = _pbs(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    path = next((home / ".jobenv" / "jobs").glob("*.json"))
    data = json.loads(path.read_text())
    data["status"] = {"state": "ended", "reason": "test"}
    path.write_text(json.dumps(data))
    assert "nothing to clean" in jobenv(["clean", "--older-than", "7d"], env, check=True).stdout
    old = time.time() - 8 * 86400
    os.utime(path, (old, old))
    assert "would remove" in jobenv(["clean", "--older-than", "7d", "-n"], env, check=True).stdout
    assert "removed job" in jobenv(["clean", "--older-than", "7d"], env, check=True).stdout
    assert not list(path.parent.glob("*.json"))


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
