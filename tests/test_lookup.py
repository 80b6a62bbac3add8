"""Job ids, rm, clean --corrupt, and terminal escapes in what they print, through the CLI."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import machines
from conftest import base_env, jobenv
from jobenv.store import files as store


def _pbs(tmp_path: Path, home: Path, jobid: str, name: str = "STDIN") -> dict:
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    env.update(PBS_JOBID=jobid, PBS_JOBNAME=name)
    return env


def _jsons(home: Path) -> list:
    return sorted(p.name for p in (home / ".jobenv" / "jobs").glob("*.json"))


def test_long_ids_never_share_a_file_set(tmp_path, home):
    a = "7" * 10 + "." + "a" * 200 + ".one"
    b = "7" * 10 + "." + "a" * 200 + ".two"
    assert store.key_for("pbs", a) != store.key_for("pbs", b)
    assert len(store.key_for("pbs", a)) <= 160
    for jobid in (a, b):
        jobenv(["save", "--quiet"], _pbs(tmp_path, home, jobid), check=True)
    rows = json.loads(jobenv(["list", "--json"], base_env(home), check=True).stdout)
    assert sorted(r["jobid"] for r in rows) == sorted([a, b]) and len(_jsons(home)) == 2


def test_empty_job_is_an_error(tmp_path, home):
    env = _pbs(tmp_path, home, "123.serverA")
    jobenv(["save", "--quiet"], env, check=True)
    for args in (["show", "--job", ""], ["rm", ""], ["watch", "--job", " "]):
        p = jobenv(args, env)
        assert p.returncode == 5 and "--job needs a job id" in p.stderr, (args, p.stderr)
    assert len(_jsons(home)) == 1


def test_rm_short_id_matching_two_jobs_is_ambiguous(tmp_path, home):
    jobenv(["save", "--quiet"], _pbs(tmp_path, home, "123.serverA"), check=True)
    jobenv(["save", "--quiet"], _pbs(tmp_path, home, "123.serverB"), check=True)
    env = base_env(home)
    p = jobenv(["rm", "123"], env)
    assert p.returncode == 5 and "123.serverA" in p.stderr and "123.serverB" in p.stderr
    assert len(_jsons(home)) == 2
    assert jobenv(["rm", "123.serverB"], env, check=True).stdout == "removed job 123.serverB\n"
    assert jobenv(["rm", "123"], env, check=True).stdout == "removed job 123.serverA\n"
    assert not list((home / ".jobenv" / "jobs").iterdir()) or \
        all(p.suffix == ".lock" for p in (home / ".jobenv" / "jobs").iterdir())


def test_rm_and_clean_remove_corrupt_and_future_records(tmp_path, home):
    env = _pbs(tmp_path, home, "6000.pbs01.cluster.edu")
    jobenv(["save", "--quiet"], env, check=True)
    jobs = home / ".jobenv" / "jobs"
    good = json.loads((jobs / "pbs-6000.pbs01.cluster.edu.json").read_text())
    (jobs / "pbs-77.json").write_text(json.dumps({**good, "jobid": "77", "schema_version": 99}))
    (jobs / "pbs-78.json").write_text('{"schema_version": 2, "scheduler": "pbs", "jobid": "78", "hosts"')
    (jobs / "pbs-79.json").write_text(json.dumps({**good, "jobid": "79", "status": {"heartbeat": float("nan")}}))
    for p in jobs.glob("*.json"):
        p.chmod(0o600)
    p = jobenv(["rm", "77"], env)
    assert p.returncode == 0 and p.stdout == "removed job 77\n", p.stderr
    p = jobenv(["rm", "78"], env)  # truncated: the id comes from the file name
    assert p.returncode == 0, p.stderr
    assert "would remove" in jobenv(["clean", "--corrupt", "-n"], env, check=True).stdout
    out = jobenv(["clean", "--corrupt"], env, check=True).stdout
    assert "removed job 79" in out and "6000" not in out
    assert _jsons(home) == ["pbs-6000.pbs01.cluster.edu.json"]


def test_clean_older_than_measures_saved_time(tmp_path, home):
    env = _pbs(tmp_path, home, "6000.pbs01.cluster.edu")
    jobenv(["save", "--quiet"], env, check=True)
    path = home / ".jobenv" / "jobs" / "pbs-6000.pbs01.cluster.edu.json"
    data = json.loads(path.read_text())
    data["status"] = {"state": "ended", "reason": "test"}
    path.write_text(json.dumps(data))
    old = time.time() - 8 * 86400
    os.utime(path, (old, old))  # an old mtime alone says nothing about when it was saved
    assert "nothing to clean" in jobenv(["clean", "--older-than", "7d"], env, check=True).stdout
    data["created_at"] = old
    path.write_text(json.dumps(data))  # mtime is now; the saved time is 8 days ago
    assert "would remove" in jobenv(["clean", "--older-than", "7d", "-n"], env, check=True).stdout
    assert "removed job" in jobenv(["clean", "--older-than", "7d"], env, check=True).stdout
    assert not list(path.parent.glob("*.json"))


def test_terminal_escapes_are_printed_visibly(tmp_path, home):
    jobid = "66\x1b]0;owned\x07\x9b31m.srv"
    env = _pbs(tmp_path, home, jobid, name="n\x1b[2J")
    outs = [jobenv(["save"], env, check=True).stdout,
            jobenv(["show", "--job", jobid], env, check=True).stdout,
            jobenv(["list"], env, check=True).stdout,
            jobenv(["rm", jobid], env, check=True).stdout]
    for out in outs:
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, repr(out)
    assert "66\\x1b]0;owned\\x07\\x9b31m.srv" in outs[0] and "\\x1b[2J" in outs[1]
    assert "\\x1b" in outs[2] and outs[3].startswith("removed job 66\\x1b")
