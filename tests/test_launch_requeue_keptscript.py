"""The kept copy of a job's batch script (jobenv.launch.requeue.keptscript): taken once, the user's
own (0600 in a 0700 directory), never replaced, never taken from a place another user
controls; without it a resubmission is refused with one line, never made from the path."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from jobenv.launch.requeue import keptscript, preempt, bring_back
from jobenv.store.record import JobRecord
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
    bring_back.keep_script(rec, env, said_lines.append)
    assert len(said_lines) == 1 and said_lines[0].startswith("warning: no copy of job 77's batch script")


def test_jobenv_submits_own_script_stands_in(tmp_path):
    """Where PBS's copy cannot be read, the script `jobenv submit` wrote into the store."""
    from jobenv.store import submissions

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
    assert argv == ["qsub", "-l", "select=2", "-N", "run", "-v", "JOBENV_RESUBMITS=1", kept] and \
        cwd == "/home/alice/proj" and not why


def test_a_pbs_launch_resubmits_the_copy_it_kept_not_the_workdirs_file(tmp_path):
    """`launch --requeue` in a PBS job whose qrerun is refused: qsub gets the copy of
    mom_priv/jobs/<id>.SC kept at the start, with Submit_arguments' flags, never
    PBS_O_WORKDIR/job.sh (replaced after the submission)."""
    import json
    import signal
    import subprocess
    import time

    import pytest

    from launchkit import BIN, fresh_env, save, tools
    from machines import polaris
    from test_launch_e2e import HOST, profile

    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    env = polaris(tmp_path, nodes=1)
    jobid = env["PBS_JOBID"]
    env["PBS_HOME"] = str(tmp_path / "pbs")
    (tmp_path / "pbs" / "mom_priv" / "jobs").mkdir(parents=True)
    (tmp_path / "pbs" / "mom_priv" / "jobs" / f"{jobid}.SC").write_text("#!/bin/sh\necho the script PBS ran\n")
    Path(env["PBS_NODEFILE"]).write_text(f"{HOST}\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "job.sh").write_text("#!/bin/sh\necho PLANTED\n")  # what is at the submission path now
    answer = {"Jobs": {jobid: {"Job_Name": "job.sh", "job_state": "R", "Rerunable": "True", "run_count": 1,
                               "Account_Name": "datascience", "Submit_arguments": "-l select=1 -A datascience job.sh",
                               "Variable_List": {"PBS_O_WORKDIR": str(proj)}}}}
    (tmp_path / "answer").write_text(json.dumps(answer, indent="\t", separators=(",", ":\t")))
    bindir = tools(tmp_path / "bin")
    for name, body in {"qstat": f"cat {tmp_path}/answer",
                       "qrerun": "echo 'qrerun: Unauthorized Request' >&2; exit 1",
                       "qsub": f'eval last=\\${{$#}}; echo "$PWD $*" > {tmp_path}/qsub-argv; '
                               f'cat "$last" > {tmp_path}/qsub-script; echo 2024085.polaris-pbs-01'}.items():
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    home = tmp_path / "home"
    profile(home, "polaris-here", "pbs", "[mpiexec, --launcher, fork, -n, '{nranks}', -ppn, '{ppn}', "
            "--hostfile, '{hostfile}']")
    fresh = fresh_env(home, f"{bindir}:/usr/bin:/bin")
    save({**fresh, **env, "JOBENV_RANKS_PER_HOST": "1"}, "--profile", "polaris-here")
    prog = tmp_path / "prog.py"
    prog.write_text(f"import signal, sys, time\nsignal.signal(signal.SIGUSR1, lambda s, f: sys.exit(0))\n"
                    f"open('{tmp_path}/up', 'w')\ntime.sleep(120)\n")
    p = subprocess.Popen(["jobenv", "launch", "--job", jobid, "--requeue", "--grace", "5", "--", "python3", str(prog)],
                         env=fresh, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 60
    while not (tmp_path / "up").exists():
        assert time.time() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.1)
    kept = home / ".jobenv" / "scripts" / f"pbs-{jobid}.sh"
    assert kept.read_text() == "#!/bin/sh\necho the script PBS ran\n"  # kept before the program ran
    (tmp_path / "pbs" / "mom_priv" / "jobs" / f"{jobid}.SC").unlink()  # and needed no more
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    assert "Traceback" not in err and f"job {jobid} resubmitted: 2024085.polaris-pbs-01" in err, err
    assert (tmp_path / "qsub-argv").read_text().split() == [str(proj), "-l", "select=1", "-A", "datascience",
                                                            "-v", "JOBENV_RESUBMITS=1", str(kept)]
    assert (tmp_path / "qsub-script").read_text() == "#!/bin/sh\necho the script PBS ran\n"
