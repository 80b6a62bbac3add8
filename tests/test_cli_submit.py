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


PLANTED = ("sbatch", "qsub", "bsub", "flux", "scancel", "squeue", "scontrol", "sacct", "qstat", "qdel")


def test_no_scheduler_command_runs_from_the_working_directory(home, tmp_path):
    """Issue 24: with `.` or an empty entry in PATH, a `./sbatch` another user left in the
    working directory ran as the user.  Scheduler commands are found through absolute PATH
    directories only: submit, status, logs, cancel and save --job find none here."""
    cwd = tmp_path / "shared-dir"
    cwd.mkdir()
    mark = tmp_path / "ran"
    for prog in PLANTED:
        (cwd / prog).write_text(f"#!/bin/sh\necho {prog} >> {mark}\necho 'Submitted batch job 1'\n")
        (cwd / prog).chmod(0o755)
    plant(home, "slurm-1.json", submission("1"))
    none = tmp_path / "no-scheduler-here"  # /usr/bin may hold the test cluster's Slurm
    none.mkdir()
    for path in (f".:{none}", f"{none}::{none}", f"{none}:", f"shared-dir/..:{none}"):
        env = base_env(home, path=path)
        for cmd in (["submit", "--", "true"], ["status", "-j", "1"], ["logs", "-j", "1"], ["cancel", "-j", "1"],
                    ["save", "--job", "1", "--scheduler", "slurm"], ["save", "--job", "1"]):
            p = jobenv(cmd, env, cwd=cwd)
            assert not mark.exists(), (path, cmd, p.stderr, mark.read_text())
            assert "Traceback" not in p.stderr, p.stderr
    p = jobenv(["submit", "--", "true"], base_env(home, path=f".:{none}"), cwd=cwd)
    one_error(p, 5, "no scheduler's submit command on PATH")
    p = jobenv(["cancel", "-j", "1"], base_env(home, path=f".:{cwd}:{none}"), cwd=cwd)  # an absolute entry: found
    assert p.returncode == 0 and mark.read_text() == "scancel\n", p.stderr


def test_command_path_takes_absolute_directories_only(tmp_path, monkeypatch):
    from jobenv.schedulers.base import command_path, on_path

    (tmp_path / "qstat").write_text("#!/bin/sh\n")
    (tmp_path / "qstat").chmod(0o755)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "qstat").mkdir()  # a directory is no command
    (tmp_path / "plain").write_text("")  # nor is a file that is not executable
    monkeypatch.chdir(tmp_path)
    for path in (".", "", ":", "./", "sub/..", f"{tmp_path}/sub"):
        assert command_path("qstat", path) is None and not on_path("qstat", path), path
    assert command_path("qstat", f"::{tmp_path}/sub:.:{tmp_path}") == str(tmp_path / "qstat")
    assert command_path("plain", str(tmp_path)) is None
    assert command_path("./qstat", str(tmp_path)) is None and command_path(str(tmp_path / "qstat"), "") == \
        str(tmp_path / "qstat")
