"""`jobenv status/logs/cancel`: which job a handle names, and hostile ids and records."""
from __future__ import annotations

import json

from conftest import base_env, jobenv


def plant(home, name, rec):
    d = home / ".jobenv" / "batch"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / ".jobenv").chmod(0o700)
    (d / name).write_text(rec if isinstance(rec, str) else json.dumps(rec))


def submission(jobid, scheduler="slurm", **kw):
    rec = {"scheduler": scheduler, "jobid": jobid, "profile": "slurm", "script": "/x/job.sh", "output": "/x/job.out",
           "error": "/x/job.err", "log_dir": "/x/ranks", "exit_file": "/x/exit", "submitted_at": 1.0,
           "command": ["true"], "cwd": "/"}
    rec.update(kw)
    return rec


def one_error(p, code, says):
    assert p.returncode == code and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("jobenv: error:") and says in p.stderr, p.stderr


def test_no_job_at_all_is_exit_3(home):
    for cmd in (["status"], ["logs"], ["cancel"]):
        one_error(jobenv(cmd, base_env(home)), 3, "no submitted or saved job")


def test_job_ids_of_the_wrong_shape_never_reach_a_command(home, tmp_path):
    # a scancel on PATH that would leave a mark: it must not run for a bad id
    bindir = tmp_path / "bin"
    bindir.mkdir()
    mark = tmp_path / "ran"
    for prog in ("scancel", "squeue", "scontrol", "sacct"):
        (bindir / prog).write_text(f"#!/bin/sh\ntouch {mark}\n")
        (bindir / prog).chmod(0o755)
    plant(home, "slurm-x.json", submission("--help"))
    env = base_env(home, path=f"{bindir}:/usr/bin:/bin")
    for cmd in (["cancel", "-j", "--help"], ["status", "-j", "--help"], ["logs", "-j", "--help"]):
        one_error(jobenv(cmd, env), 5, "not shaped like a slurm job id")
    assert not mark.exists()
    one_error(jobenv(["status", "-j", ""], env), 5, "expected a job id")
    one_error(jobenv(["status", "-j", "1\x1b[2J"], env), 5, "expected a job id")


def test_corrupt_submission_records_are_skipped_with_a_warning(home):
    plant(home, "slurm-1.json", "{not json")
    plant(home, "slurm-2.json", json.dumps(submission("2", submitted_at="yesterday")))
    p = jobenv(["status", "-j", "1"], base_env(home))
    assert p.returncode == 3 and "skipping submission" in p.stderr and "not valid JSON" in p.stderr


def test_saved_local_job_has_no_scheduler_to_ask(home):
    env = base_env(home)
    jobenv(["save", "--quiet"], env, check=True)
    p = jobenv(["status"], env)
    assert p.returncode == 0 and "unknown" in p.stdout and "(local)" in p.stdout, p.stdout + p.stderr
    one_error(jobenv(["cancel"], env), 5, "no scheduler to ask")


def test_ended_job_from_its_exit_file_when_no_scheduler_answers(home, tmp_path):
    exit_file = tmp_path / "exit"
    exit_file.write_text("7\n")
    out = tmp_path / "job.out"
    out.write_text("batch says hi\n")
    plant(home, "slurm-42.json", submission("42", exit_file=str(exit_file), output=str(out), log_dir=str(tmp_path)))
    env = base_env(home, path="/usr/bin:/bin")  # no squeue here
    p = jobenv(["status"], env)
    assert p.returncode == 0, p.stderr
    assert "ended (finished)" in p.stdout and "exit       7" in p.stdout
    p = jobenv(["logs", "-f"], env)  # the job has ended: prints and returns
    assert p.returncode == 0 and "batch says hi" in p.stdout


def test_script_out_honours_the_umask_and_writes_a_fifo_in_place(home, shared_tmp, other_user):
    """Issue 24: a Cobalt --script-out was made 0755 whatever the umask, and another user read
    the token the command line carried; a FIFO (or /dev/null) was renamed over."""
    import os
    import stat
    import threading

    env = base_env(home)
    out = shared_tmp / "job.sh"
    args = ["submit", "--dry-run", "--profile", "cobalt", "--nodes", "2", "--script-out"]
    p = jobenv([*args, str(out), "--", "train", "--token=s3cret"], env, umask=0o077)
    assert p.returncode == 0 and "s3cret" in out.read_text(), p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o700  # runnable by its owner, nobody else's
    seen = other_user.sh(f"cat {out}", check=False)
    assert seen.returncode != 0 and "s3cret" not in seen.stdout
    fifo = shared_tmp / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    p = jobenv([*args, str(fifo), "--", "train"], env)
    reader.join(60)
    assert p.returncode == 0 and got and got[0] == p.stdout and stat.S_ISFIFO(fifo.lstat().st_mode), p.stderr
