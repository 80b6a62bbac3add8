"""`jobenv get`: which job, is it alive, how fast, in which dialect."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import machines
from conftest import REPO, base_env, jobenv, need
from jobenv.store import cache as getcache
from jobenv.store import files as store
from jobenv.store.record import JobRecord


def put(env: dict, jobid: str, hosts=("n1",), created_at="2026-01-01T00:00:00+0000", status=None,
        scheduler="slurm") -> str:
    """Write a record straight into the store (thousands of `jobenv save` would take minutes)."""
    if isinstance(created_at, str):  # record schema 2 stores UTC epoch seconds
        from datetime import datetime

        created_at = datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    d = store.jobs_dir(env)
    os.makedirs(d, mode=0o700, exist_ok=True)
    os.chmod(os.path.dirname(d), 0o700)
    rec = JobRecord(scheduler=scheduler, jobid=jobid, machine=scheduler, hosts=list(hosts), gpus_per_host=0,
                    ranks_per_host=1, hostfile=None, launch=["srun"],
                    env={"SLURM_JOB_ID": jobid} if scheduler == "slurm" else {}, created_at=created_at,
                    created_on=hosts[0], status=status or {"state": "live"})
    path = store.paths_for(store.key_for(scheduler, jobid), env)[0]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(rec.to_json())
    return path


def bare(home: Path, **extra) -> dict:
    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
           "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "JOBENV_HOSTNAME": "n1"}
    env.update(extra)
    return env


def test_live_job_without_record_is_named_not_switched(home):
    env = bare(home)
    put(env, "99")
    p = jobenv(["get"], {**env, "SLURM_JOB_ID": "100", "SLURM_JOB_NODELIST": "n1"})
    assert p.returncode == 3 and p.stdout == ""
    assert "this shell is in slurm job 100, which has no record: run `jobenv save`" in p.stderr
    ok = jobenv(["get", "--job", "99"], {**env, "SLURM_JOB_ID": "100"})
    assert ok.returncode == 0 and "\nSLURM_JOB_ID='99'\n" in ok.stdout


def test_live_job_with_record_is_restored(home):
    env = bare(home)
    put(env, "99", created_at="2026-01-02T00:00:00+0000")
    put(env, "100")
    p = jobenv(["get"], {**env, "SLURM_JOB_ID": "100"})
    assert p.returncode == 0 and "JOBENV_JOBID='100'" in p.stdout and "SLURM_JOB_ID" not in p.stdout


def test_site_configuration_is_not_unset(home):
    env = bare(home)
    put(env, "100")
    site = {"SLURM_CONF": "/etc/slurm.conf", "SLURM_TIME_FORMAT": "relative", "PBS_SERVER": "pbs1",
            "PBS_CONF_FILE": "/etc/pbs.conf"}
    p = jobenv(["get", "--job", "100", "--shell", "bash"], {**env, **site, "SLURM_JOB_ID": "99", "SLURM_NNODES": "3"})
    assert p.returncode == 0, p.stderr
    unset = [line for line in p.stdout.splitlines() if line.startswith("unset ")]
    assert unset == ["unset SLURM_NNODES"]


def test_empty_job_id_is_refused(home):
    env = bare(home)
    put(env, "100")
    p = jobenv(["get", "--job", ""], env)
    assert p.returncode == 5 and "--job needs a job id" in p.stderr


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_silent_watcher_means_unknown_not_ended(home, how):
    """A watcher that stopped beating (SIGKILL, SIGSTOP) proves nothing about the job."""
    env = bare(home)
    put(env, "100", status={"state": "live", "heartbeat": time.time() - 3600, "interval": 30.0})
    p = jobenv(["get", "--shell", "bash"], env)
    assert p.returncode == 0, p.stderr
    assert "unknown (`jobenv watch` went silent" in p.stdout


def test_fresh_heartbeat_is_trusted_without_asking_the_scheduler(tmp_path, home):
    calls = tmp_path / "calls"
    bindir = stub_squeue(tmp_path, calls, sleep=0, answer="RUNNING")
    env = bare(home, PATH=f"{bindir}:/usr/bin:/bin")
    put(env, "100", status={"state": "live", "heartbeat": time.time(), "interval": 30.0})
    p = jobenv(["get", "--shell", "bash"], env)
    assert p.returncode == 0 and "live (heartbeat from `jobenv watch`" in p.stdout
    assert not calls.exists()


def stub_squeue(tmp: Path, calls: Path, sleep: float, answer: str) -> Path:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    sq = bindir / "squeue"
    sq.write_text(f"#!/bin/sh\necho x >> {calls}\nsleep {sleep}\necho {answer}\n")
    sq.chmod(0o755)
    return bindir


def test_liveness_is_bounded_and_cached(tmp_path, home):
    """A hung squeue costs one shell about 2 s, once; the next shells fork nothing."""
    calls = tmp_path / "calls"
    bindir = stub_squeue(tmp_path, calls, sleep=30, answer="RUNNING")
    env = bare(home, PATH=f"{bindir}:/usr/bin:/bin")
    put(env, "100")
    t = time.monotonic()
    p = jobenv(["get", "--shell", "bash"], env)
    took = time.monotonic() - t
    assert p.returncode == 0, p.stderr
    assert took < 8, took  # 2 s bound plus a loaded CI machine's start-up
    assert "unknown" in p.stdout.splitlines()[0]
    q = jobenv(["get", "--shell", "bash"], env)
    assert q.returncode == 0 and calls.read_text().count("x") == 1


def test_scheduler_verdict_is_cached(tmp_path, home):
    calls = tmp_path / "calls"
    bindir = stub_squeue(tmp_path, calls, sleep=0, answer="RUNNING")
    env = bare(home, PATH=f"{bindir}:/usr/bin:/bin")
    put(env, "100")
    for _ in range(3):
        p = jobenv(["get", "--shell", "bash"], env)
        assert p.returncode == 0 and "live (squeue" in p.stdout.splitlines()[0], p.stdout + p.stderr
    assert calls.read_text().count("x") == 1


def settle(env: dict) -> None:
    """Let every time stamp age past getcache.RACY (a cache is only written over settled files)."""
    os.makedirs(os.path.join(env["JOBENV_HOME"], "cache"), mode=0o700, exist_ok=True)
    time.sleep(getcache.RACY + 0.2)


def test_index_reads_one_record_of_many(home):
    """With the per-host index, `get` no longer reads every record: the others may even be
    corrupt in place (which leaves the directory unchanged) without a word."""
    env = bare(home)
    paths = [put(env, str(i), hosts=("other",), created_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+0000")
             for i in range(300)]
    mine = put(env, "1000", created_at="2025-01-01T00:00:00+0000")
    settle(env)
    first = jobenv(["get", "--shell", "bash"], env)
    assert first.returncode == 0 and "JOBENV_JOBID='1000'" in first.stdout
    for p in paths:
        with open(p, "r+") as f:  # in place: same directory entry, same directory mtime
            f.truncate(10)
    again = jobenv(["get", "--shell", "bash"], env)
    assert again.returncode == 0 and again.stdout == first.stdout and "skipping" not in again.stderr
    os.unlink(paths[0])  # a change to the directory: look again, and see the defects
    third = jobenv(["get", "--shell", "bash"], env)
    assert third.returncode == 0 and "skipping" in third.stderr
    assert mine


def test_dialect_from_the_parent_shell(tmp_path, home):
    """A fish login shell ($SHELL) must not make bash read fish code, and the reverse."""
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    b = {**bare(home, JOBENV_HOSTNAME="workstation7"), "SHELL": "/usr/bin/fish"}
    cmd = f"{sys.executable} -m jobenv get"
    for program, script in (("bash", f"source <({cmd}) && echo $NHOSTS && type launch"),
                            ("zsh", f"source <({cmd}) && echo $NHOSTS && whence -w launch"),
                            ("dash", f'eval "$({cmd})" && echo $NHOSTS && type launch'),
                            ("fish", f"{cmd} | source; and echo $NHOSTS; and type launch")):
        exe = need(program)
        shell_var = "/usr/bin/fish" if program != "fish" else "/bin/bash"
        p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in {**b, "SHELL": shell_var}.items()], exe, "-c", script],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (program, p.stderr)
        assert p.stdout.startswith("1\n") and "function" in p.stdout, (program, p.stdout)


def test_shell_sh_option_for_dash(tmp_path, home):
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    p = jobenv(["get", "--shell", "sh"], env)
    assert p.returncode == 0 and "launch() {" in p.stdout and "function" not in p.stdout
    q = subprocess.run(["dash", "-c", p.stdout + "\ntype launch"], capture_output=True, text=True, env=env)
    assert q.returncode == 0 and "function" in q.stdout


def test_get_record_json_is_unchanged_by_get(home):
    """`get` writes only under cache/: the records and the jobs directory are left alone."""
    env = bare(home)
    path = put(env, "100")
    before = (os.stat(path).st_mtime_ns, os.stat(os.path.dirname(path)).st_mtime_ns)
    jobenv(["get"], env, check=True)
    assert (os.stat(path).st_mtime_ns, os.stat(os.path.dirname(path)).st_mtime_ns) == before
    assert json.loads(Path(path).read_text())["jobid"] == "100"


@pytest.mark.parametrize("shell_name", ["bash", "zsh", "fish", "dash"])
def test_record_fields_cannot_carry_code(tmp_path, home, shell_name):
    """A record edited by someone else: launch_env keys with code, env keys that run code."""
    exe = need(shell_name)
    env = bare(home)
    path = put(env, "100")
    data = json.loads(Path(path).read_text())
    flag = tmp_path / "F"
    data["launch_env"] = {f"X=1; touch {flag}; Y": "1", "LD_PRELOAD": "/evil.so", "OK_VAR": "1"}
    data["env"].update(PATH="/evil", PROMPT_COMMAND=f"touch {flag}", BASH_ENV="/evil", LD_PRELOAD="/evil.so")
    Path(path).write_text(json.dumps(data))
    dialect = {"dash": "sh"}.get(shell_name, shell_name)
    get = f"{sys.executable} -m jobenv get --shell {dialect}"
    script = (f"{get} | source; and env" if shell_name == "fish" else f'eval "$({get})" && env')
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, "-c", script],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    assert got["PATH"] == "/usr/bin:/bin" and got["OK_VAR"] == "1" and got["SLURM_JOB_ID"] == "100"
    for k in ("LD_PRELOAD", "BASH_ENV", "PROMPT_COMMAND"):
        assert k not in got
    assert not flag.exists()
    assert "may not set" in p.stderr


def test_staged_copy_plugs_into_the_plan(tmp_path, home):
    """stage.restore_items (an `extra` item of the plan) reaches every dialect through the one plan."""
    env = bare(home)
    path = put(env, "100")
    prefix = tmp_path / "local disk" / "venv"
    prefix.mkdir(parents=True)
    (prefix / ".jobenv-stage.json").write_text(json.dumps({"key": "m1", "kind": "venv"}))
    data = json.loads(Path(path).read_text())
    data["staged"] = {"n1": {"prefix": str(prefix), "manifest": "m1", "verified_at": 1.0}}
    Path(path).write_text(json.dumps(data))
    p = jobenv(["get", "--shell", "bash"], env)
    assert p.returncode == 0, p.stderr
    assert f"\nVIRTUAL_ENV='{prefix}'\n" in p.stdout
    assert f"\nPATH='{prefix}/bin'\"${{_jobenv_p:+:$_jobenv_p}}\"\n" in p.stdout
    for before in ("/usr/bin:/bin", f"/usr/bin:{prefix}/bin:/bin"):  # its bin once, first
        q = subprocess.run(["bash", "--norc", "-c", p.stdout + '\nprintf %s "$PATH"'], capture_output=True,
                           text=True, env={"PATH": before})
        assert q.stdout == f"{prefix}/bin:/usr/bin:/bin"
    f = jobenv(["get", "--shell", "fish"], env)
    assert f"set -gx PATH '{prefix}/bin' $_jobenv_p" in f.stdout


def test_a_restore_names_the_job_it_chose_on_a_terminal_only(tmp_path, home):
    """A person in a new shell hears which job it got (the newest on this host) in one line on
    stderr, from `jobenv get` and from getjobenv's cached path alike; `-j ID` (their own
    choice) and a script's piped stderr stay silent.  Run on a real pseudo-terminal."""
    from test_output import on_a_terminal

    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
           "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "JOBENV_HOSTNAME": "n1", "TERM": "xterm"}
    jobenv(["save", "--quiet"], env, check=True)
    Path(env["JOBENV_HOME"], "cache").mkdir(mode=0o700)
    time.sleep(getcache.RACY + 0.3)  # the cached snippet proves only files older than this
    get = f"{sys.executable} -m jobenv get"
    seen = on_a_terminal(["bash", "-c", f"source <({get}) && echo ID=$JOBENV_JOBID"], env)
    assert "ID=n1" in seen and seen.count("jobenv: restored local job n1; -j ID restores another") == 1, seen
    assert "restored" not in on_a_terminal(["bash", "-c", f"source <({get} -j n1)"], env)
    piped = subprocess.run(["bash", "-c", f"source <({get})"], env=env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    # getjobenv's cached path (no Python: no jobenv on PATH to ask) says the same words, once
    fns = REPO / "shell" / "jobenv.sh"
    seen = on_a_terminal(["bash", "--norc", "-c", f". {fns} && getjobenv && echo ID=$JOBENV_JOBID"], env)
    assert "ID=n1" in seen and seen.count("jobenv: restored local job n1;") == 1, seen
    piped = subprocess.run(["bash", "--norc", "-c", f". {fns} && getjobenv"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
