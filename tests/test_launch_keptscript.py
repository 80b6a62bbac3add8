"""The kept copy of a job's batch script (jobenv.launch.keptscript): taken once, the user's
own (0600 in a 0700 directory), never replaced, never taken from a place another user
controls; without it a resubmission is refused with one line, never made from the path."""
from __future__ import annotations

import os
import stat

from jobenv.launch import keptscript, preempt, requeue
from jobenv.record import JobRecord
from jobenv.schedulers import pbs, slurm


def record(scheduler="pbs", jobid="4242.pbs-server"):
    return JobRecord(scheduler=scheduler, jobid=jobid, machine="generic", hosts=["n1"], gpus_per_host=0,
                     ranks_per_host=1, hostfile=None, launch=[], env={}, created_at=1.0, created_on="n1")


def mom(tmp_path, jobid, text):
    jobs = tmp_path / "pbs" / "mom_priv" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / f"{jobid}.SC").write_text(text)
    return {"PBS_HOME": str(tmp_path / "pbs"), "JOBENV_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}


def test_the_copy_is_taken_once_and_is_the_users_alone(tmp_path):
    rec = record()
    env = mom(tmp_path, rec.jobid, "#!/bin/sh\necho first\n")
    path, why = keptscript.keep(rec, env)
    assert why == "" and path == os.path.join(env["JOBENV_HOME"], "scripts", "pbs-4242.pbs-server.sh")
    assert open(path).read() == "#!/bin/sh\necho first\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    (tmp_path / "pbs" / "mom_priv" / "jobs" / f"{rec.jobid}.SC").write_text("#!/bin/sh\necho changed\n")
    assert keptscript.keep(rec, env) == (path, "")  # idempotent: the first copy stays
    assert open(path).read() == "#!/bin/sh\necho first\n"
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]  # no temp file left


def test_a_planted_or_loosened_copy_is_refused(tmp_path, other_user):
    rec = record()
    env = mom(tmp_path, rec.jobid, "#!/bin/sh\ntrue\n")
    path, _ = keptscript.keep(rec, env)
    os.chmod(path, 0o666)
    kept, why = keptscript.keep(rec, env)
    assert kept == "" and "writable by others" in why
    os.chmod(path, 0o600)
    os.chown(path, other_user.uid, other_user.gid)
    kept, why = keptscript.keep(rec, env)
    assert kept == "" and "owned by uid" in why
    os.unlink(path)
    os.symlink("/etc/passwd", path)
    assert keptscript.keep(rec, env)[0] == ""


def test_no_copy_no_resubmission_and_never_the_path(tmp_path):
    rec = record("slurm", "77")
    env = {"JOBENV_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "empty")}  # no scontrol here
    path, why = keptscript.keep(rec, env)
    assert path == "" and "scontrol is not on PATH" in why
    facts = slurm.parse_show_job("JobId=77 JobName=x\n   UserId=alice(1000) GroupId=a(1000)\n   JobState=RUNNING "
                                 "Requeue=0\n   Command=/shared/job.sh\n   WorkDir=/shared\n")
    argv, _, said = preempt.resubmission(facts, slurm.REQUEUE, path, why)
    assert argv == [] and "scontrol is not on PATH" in said and "/shared/job.sh" not in said
    said_lines = []
    requeue.keep_script(rec, env, said_lines.append)
    assert len(said_lines) == 1 and said_lines[0].startswith("warning: no copy of job 77's batch script")


def test_jobenv_submits_own_script_stands_in(tmp_path):
    """Where PBS's copy cannot be read, the script `jobenv submit` wrote into the store."""
    from jobenv.batch import submissions

    rec = record()
    env = {"JOBENV_HOME": str(tmp_path / "home"), "PBS_HOME": str(tmp_path / "nopbs"), "PATH": "/usr/bin:/bin"}
    d = submissions.new_dir(env)
    with open(os.path.join(d, "job.sh"), "w") as f:
        f.write("#!/bin/sh\n#PBS -l select=1\necho submitted\n")
    submissions.save(env, {"scheduler": "pbs", "jobid": rec.jobid, "profile": "pbs", "script": os.path.join(d, "job.sh"),
                           "output": "", "error": "", "log_dir": "", "exit_file": "", "submitted_at": 1.0,
                           "command": [], "cwd": "/"})
    path, why = keptscript.keep(rec, env)
    assert why == "" and open(path).read().endswith("echo submitted\n")
    # a submission record naming a script outside the store is not followed
    other = record(jobid="4243.pbs-server")
    submissions.save(env, {"scheduler": "pbs", "jobid": other.jobid, "profile": "pbs", "script": "/etc/passwd",
                           "output": "", "error": "", "log_dir": "", "exit_file": "", "submitted_at": 1.0,
                           "command": [], "cwd": "/"})
    assert keptscript.keep(other, env)[0] == ""


def test_pbs_resubmits_the_kept_copy_with_its_flags(tmp_path):
    from test_pbs_requeue import qstat_json

    rec = record()
    env = mom(tmp_path, rec.jobid, "#!/bin/sh\ntrue\n")
    kept, _ = keptscript.keep(rec, env)
    facts = pbs.REQUEUE.parse(qstat_json(["-l", "select=2", "-N", "run", "/shared/job.sh"], "run"))
    argv, cwd, why = preempt.resubmission(facts, pbs.REQUEUE, kept)
    assert argv == ["qsub", "-l", "select=2", "-N", "run", kept] and cwd == "/home/alice/proj" and not why
