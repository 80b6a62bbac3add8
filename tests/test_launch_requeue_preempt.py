"""Pre-emption decisions (jobenv.launch.requeue.preempt) on the schedulers' real outputs and
environments, and `jobenv launch --requeue` / `jobenv kill` on this host with the MPICH
wheel's mpiexec.  The Slurm cluster runs the whole flow: tests/test_launch_requeue_preempt_slurm.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobenv.launch.watch import kill

from jobenv.launch.requeue import preempt
from jobenv.schedulers import SITE_VARS, pbs, pbs_requeue, slurm
from machines import polaris
from test_launch_watch_supervise import job  # noqa: F401 (fixture: a local 2-rank mpiexec job)

# `scontrol show job 1` on the test cluster (Slurm 22.05.8), a batch script given on stdin
SHOW_JOB = """JobId=1 JobName=sbatch
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901759 Nice=0 Account=(null) QOS=(null)
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:01 TimeLimit=00:10:00 TimeMin=N/A
   Partition=debug AllocNode:Sid=localhost:26464
   NodeList=node[1-2]
   BatchHost=node1
   NumNodes=2 NumCPUs=4 NumTasks=4 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   Socks/Node=* NtasksPerN:B:S:C=2:0:*:* CoreSpec=*
   Command=(null)
   WorkDir=/home/alice/proj
   StdErr=/home/alice/proj/job-1.out
   StdIn=/dev/null
   StdOut=/home/alice/proj/job-1.out
"""


def qstat_f(jobid: str, **attrs: object) -> str:
    """`qstat -f -F json ID` as PBS Pro 2022 prints it (Polaris), with `attrs` over the defaults."""
    attrs_ = {"Job_Name": "train.sh", "job_state": "R", "queue": "debug", "Rerunable": "True", "run_count": 1,
              "Submit_arguments": "-l select=2:system=polaris -l walltime=1:00:00 -A datascience -q debug train.sh",
              "Variable_List": {"PBS_O_WORKDIR": "/home/alice/proj", "PBS_O_HOME": "/home/alice"}}
    attrs_.update(attrs)
    return json.dumps({"timestamp": 1732500000, "pbs_version": "2022.1.3", "pbs_server": "polaris-pbs-01",
                       "Jobs": {jobid: attrs_}}, indent=4)


def test_slurm_show_job_gives_the_resubmission():
    facts = slurm.parse_show_job(SHOW_JOB)
    assert (facts.state, facts.workdir, facts.requeueable, facts.restarts) == ("RUNNING", "/home/alice/proj", True, 0)
    assert facts.submit == ("--nodes=2", "--ntasks=4", "--partition=debug", "--time=00:10:00", "--job-name=sbatch",
                            "--chdir=/home/alice/proj", "--output=/home/alice/proj/job-1.out",
                            "--error=/home/alice/proj/job-1.out", "--ntasks-per-node=2", "--requeue",
                            "--open-mode=append")
    argv, cwd, why = preempt.resubmission(facts, slurm.REQUEUE, "/home/alice/.jobenv/scripts/slurm-1.sh")
    assert argv == ["sbatch", *facts.submit, "/home/alice/.jobenv/scripts/slurm-1.sh"] and cwd == "/home/alice/proj"
    # a script submitted from a file: still only the kept copy, never the file at Command=
    on_file = slurm.parse_show_job(SHOW_JOB.replace("Command=(null)", "Command=/home/alice/proj/job.sh"))
    argv, _, why = preempt.resubmission(on_file, slurm.REQUEUE, "", "scontrol is not on PATH here")
    assert argv == [] and "scontrol is not on PATH here" in why and "never resubmits the file at the path" in why
    assert "/home/alice/proj/job.sh" not in " ".join(on_file.submit)
    # script arguments: Slurm joins them to Command= with spaces, so none can be passed on exactly
    with_args = slurm.parse_show_job(SHOW_JOB.replace("Command=(null)", "Command=/home/alice/proj/job.sh a b c"))
    argv, _, why = preempt.resubmission(with_args, slurm.REQUEUE, "/home/alice/.jobenv/scripts/slurm-1.sh")
    assert argv == [] and "arguments" in why and with_args.state == "RUNNING"


def test_pbs_requeue_and_resubmission_on_polaris(tmp_path):
    env = polaris(tmp_path)
    jobid = env["PBS_JOBID"]
    assert preempt.fill(pbs.REQUEUE.argv, jobid) == ["qrerun", jobid]
    facts = pbs_requeue.parse_show(qstat_f(jobid, Account_Name="datascience"))
    assert (facts.state, facts.workdir, facts.requeueable, facts.restarts, facts.why) == \
        ("R", "/home/alice/proj", True, 0, "")
    kept = str(tmp_path / "scripts" / "pbs-1.sh")
    argv, cwd, why = preempt.resubmission(facts, pbs.REQUEUE, kept)
    # qsub passes no environment: the count of resubmissions goes by -v
    assert argv == ["qsub", "-l", "select=2:system=polaris", "-l", "walltime=1:00:00", "-A", "datascience",
                    "-q", "debug", "-v", "JOBENV_RESUBMITS=1", kept] and cwd == "/home/alice/proj" and not why
    # a script on stdin: its flags, and the copy PBS ran (the last word is an option's value)
    stdin = pbs_requeue.parse_show(qstat_f(jobid, Account_Name="datascience", Submit_arguments="-l select=2 -A datascience"))
    argv, _, why = preempt.resubmission(stdin, pbs.REQUEUE, kept, restarts=2)
    assert argv == ["qsub", "-l", "select=2", "-A", "datascience", "-v", "JOBENV_RESUBMITS=3", kept], why
    assert pbs_requeue.parse_show(qstat_f(jobid, Submit_arguments="-V train.sh")).submit == ("-V",)
    assert pbs_requeue.parse_show(qstat_f(jobid, run_count=3)).restarts == 2
    sub = preempt.resubmit_env({**env, "PBS_SERVER": "polaris-pbs-01", "HOME": "/home/alice"}, pbs.PREFIXES,
                               SITE_VARS, 0)
    assert not any(k.startswith("PBS_") and k not in SITE_VARS for k in sub) and sub["PBS_SERVER"] == "polaris-pbs-01"
    assert sub[preempt.RESUBMITS_VAR] == "1" and sub["HOME"] == "/home/alice"
    # the old job's scratch (PBS: /var/tmp/pbs.<jobid>, gone with the job: qsub's temporary copy failed there)
    tmp = {**env, "TMPDIR": f"/var/tmp/pbs.{jobid}"}
    assert "TMPDIR" not in preempt.resubmit_env(tmp, pbs.PREFIXES, SITE_VARS, 0, jobid)
    assert preempt.resubmit_env({**env, "TMPDIR": "/scratch/alice"}, pbs.PREFIXES, SITE_VARS, 0, jobid)["TMPDIR"] \
        == "/scratch/alice"


@pytest.mark.parametrize("sched,signame,state,brought_back", [
    ("slurm", "USR1", "RUNNING", True),  # --signal=B:USR1@90: a warning, the job runs on
    ("slurm", "TERM", "RUNNING", True),  # SIGTERM with the job still running: pre-emption
    ("slurm", "TERM", "CANCELLED", False),  # scancel: someone ended it on purpose
    ("slurm", "TERM", "COMPLETING", False),  # what scontrol says right after scancel or at a time limit
    ("slurm", "TERM", "TIMEOUT", False),
    ("slurm", "USR2", "CANCELLED", True),  # USR1/USR2 never come from a cancel
    ("pbs", "TERM", "R", True),  # no substate shown: the job still R, so pre-emption (qrerun's refusal says)
    ("pbs", "TERM", "R/42", False),  # qdel or the walltime: R/41-42 while the MoM delivers SIGTERM
    ("pbs", "TERM", "R/41", False),  # what a real server showed right after qdel
    ("pbs", "USR1", "R/42", True),  # `qsig -s USR1`: a warning, the job runs on
    ("pbs", "TERM", "R/60", False),  # PBS reruns it itself (qrerun, pre-emption by requeue): it comes back alone
    ("pbs", "USR1", "R/63", False),
    ("pbs", "TERM", "E", False),  # qdel: exiting
])
def test_which_signals_bring_the_job_back(tmp_path, sched, signame, state, brought_back):
    req = {"slurm": slurm.REQUEUE, "pbs": pbs.REQUEUE}[sched]
    state, _, sub = state.partition("/")
    facts = (slurm.parse_show_job(SHOW_JOB.replace("JobState=RUNNING", f"JobState={state}")) if sched == "slurm"
             else pbs_requeue.parse_show(qstat_f("2024084.polaris-pbs-01", job_state=state,
                                                 **({"substate": int(sub)} if sub else {}))))
    why = preempt.decide(signame, facts, req, "2024084", sched)
    assert (why is None) is brought_back, why
    if sub in ("60", "63"):
        assert "rerun by pbs itself" in str(why) and "neither requeues nor resubmits" in str(why)
    assert preempt.decide(signame, None, req, "2024084") is None  # the scheduler did not answer: try


def test_a_run_count_grown_since_the_launch_began_is_pbs_rerunning_the_job():
    """A real qrerun: within a second the job is R/41 again with run_count 2 while the old
    launch still ends (tests/test_e2e_pbs.py saw it): the count, not the state, says so."""
    facts = pbs_requeue.parse_show(qstat_f("7.pbs1", run_count=2, substate=41))
    why = preempt.decide("TERM", facts, pbs.REQUEUE, "7.pbs1", "pbs", runs_before=0)
    assert why is not None and "grew from 1 to 2" in why and "neither requeues nor resubmits" in why
    assert "grew" in str(preempt.decide("USR1", facts, pbs.REQUEUE, "7.pbs1", "pbs", runs_before=0))
    assert preempt.decide("USR1", facts, pbs.REQUEUE, "7.pbs1", "pbs", runs_before=1) is None  # its own run: requeue
    assert preempt.decide("USR1", facts, pbs.REQUEUE, "7.pbs1", "pbs", runs_before=None) is None  # unknown: no guess
    assert "substate 51" in str(preempt.decide("TERM", pbs_requeue.parse_show(qstat_f("7.pbs1", job_state="E", substate=51)),
                                               pbs.REQUEUE, "7.pbs1", "pbs", runs_before=0))


def test_restart_count_sums_the_schedulers_and_jobenvs():
    assert preempt.scheduler_restarts({"SLURM_RESTART_COUNT": "2", preempt.RESUBMITS_VAR: "1"},
                                      "SLURM_RESTART_COUNT") == 3
    assert preempt.scheduler_restarts({"SLURM_RESTART_COUNT": "x", preempt.RESUBMITS_VAR: "²"}, "") == 0
    for junk in ("", "x", "-1", "١", "9" * 40):
        assert preempt.scheduler_restarts({"SLURM_RESTART_COUNT": junk}, "SLURM_RESTART_COUNT") == 0
    # PBS puts no count in the environment: qstat's run_count (as JobFacts.restarts) is the word
    assert preempt.scheduler_restarts({preempt.RESUBMITS_VAR: "1"}, "", 2) == 3
    assert preempt.scheduler_restarts({"SLURM_RESTART_COUNT": "1"}, "SLURM_RESTART_COUNT", 5) == 1
    assert preempt.scheduler_restarts({}, "", -1) == 0 and preempt.scheduler_restarts({}, "", None) == 0
    assert preempt.route("slurm-step", True) == "agent" and preempt.route("slurm-step", False) == "step"
    assert preempt.route("", False) == "here"


def launch(env, *args: str) -> subprocess.Popen:
    return subprocess.Popen(["jobenv", "launch", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def until(path_glob, home: Path, n: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while len(list(home.glob(path_glob))) < n:
        assert time.time() < deadline, f"fewer than {n} {path_glob}"
        time.sleep(0.1)


def test_requeue_gives_the_ranks_the_grace_then_ends_them(job, tmp_path):  # noqa: F811
    prog = tmp_path / "ckpt.py"
    prog.write_text("import os, signal, sys, time\nr = os.environ['RANK']\n"
                    "def h(s, f):\n    open(f'" + str(tmp_path) + "/ckpt-' + r, 'w').write('x')\n"
                    "    if r == '0':\n        sys.exit(0)\n"  # rank 0 checkpoints and ends; rank 1 hangs on
                    "signal.signal(signal.SIGUSR1, h)\nopen(f'" + str(tmp_path) + "/up-' + r, 'w')\ntime.sleep(120)\n")
    p = launch(job, "--requeue", "--grace", "3", "--", "python3", str(prog))
    until("up-*", tmp_path, 2)
    t = time.monotonic()
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    took = time.monotonic() - t
    assert p.returncode == 128 + signal.SIGUSR1, err
    assert (tmp_path / "ckpt-0").exists() and (tmp_path / "ckpt-1").exists(), err  # both were told
    assert 3 <= took < 15, took  # the grace, then the hung rank was ended
    assert "pre-empted: SIGUSR1 passed to the ranks" in err and "cannot requeue a local job" in err, err
    assert "Traceback" not in err


def test_kill_ends_a_local_launch_and_names_its_ranks(job, tmp_path):  # noqa: F811
    p = launch(job, "--", "sleep", "120")
    home = Path(job["JOBENV_HOME"])
    until("runs/*/*/host-*.ledger", home, 1)
    deadline = time.time() + 30
    while sum(ln.startswith("start ") for f in home.glob("runs/*/*/host-*.ledger") for ln in f.read_text().splitlines()) < 2:
        assert time.time() < deadline
        time.sleep(0.1)
    k = subprocess.run(["jobenv", "kill"], env=job, capture_output=True, text=True, timeout=60)
    assert k.returncode == 0 and "ended 2 rank(s) (0; 1) on 1 host(s)" in k.stderr, k.stderr
    p.communicate(timeout=30)
    assert p.returncode is not None
    k = subprocess.run(["jobenv", "kill", "--run", "nonesuch"], env=job, capture_output=True, text=True, timeout=60)
    assert k.returncode == 5 and k.stderr.startswith("jobenv: error: --run 'nonesuch': no such run"), k.stderr


def test_kill_refuses_a_run_directory_another_user_planted(job, other_user, shared_tmp):  # noqa: F811
    """--run naming a directory another user made, its `supervisor` naming a process of ours
    (host, pid, an epoch in the future) and a host agent's beat: one error line (no attempt of
    this job: exit 5), the process lives on and no `request` is written there for anyone to act on."""
    from jobenv.core.hostlist import this_host

    victim = subprocess.Popen(["sleep", "1000"])
    try:
        planted, host = shared_tmp / "20260101-000000-1-a1", this_host(job)
        other_user.sh(f"mkdir -m 777 {planted} && echo '{host} {victim.pid} 9999999999.0' > {planted}/supervisor"
                      f" && touch {planted}/host-{host}.beat")
        k = subprocess.run(["jobenv", "kill", "--run", str(planted)], env=job, capture_output=True, text=True,
                           timeout=60)
        assert k.returncode == 5 and k.stderr.startswith("jobenv: error: --run ") and \
            "not a launch attempt of this job" in k.stderr, k.stderr
        assert k.stderr.count("\n") == 1, k.stderr
        time.sleep(0.5)
        assert victim.poll() is None, "kill signalled a process named by another user's run directory"
        assert sorted(os.listdir(planted)) == [f"host-{host}.beat", "supervisor"]
    finally:
        victim.kill()
        victim.wait()


def test_kill_report_escapes_host_names_from_the_ledgers():
    lines, code = kill.report({0: "node1\x1b]0;pwned\x07", 1: "n2"}, {1: "n2\x1b[2J"})
    assert code == 1 and "\x1b" not in "".join(lines) and "\x07" not in "".join(lines)
    assert "node1\\x1b]0;pwned\\x07" in lines[0] and "rank 1 on n2\\x1b[2J" in lines[1]


@pytest.mark.parametrize("answer,count", [("run_count=3", "2"), ("latin-1 name", "2"), ("exit 1", "0"),
                                          ("garbage", "0"), ("deep", "0")])
def test_a_pbs_rerun_tells_the_program_its_restart_count(tmp_path, answer, count):
    """After `qrerun` PBS keeps PBS_JOBID and sets no count variable: a `--requeue` launch
    reads run_count from `qstat -f -F json` (recorded Polaris output), so attempt 2 of a
    requeued job sees JOBENV_RESTART_COUNT=1 like torchrun's restarts.  No answer, or one it
    cannot read: 0, and the launch goes on.  A launch without --requeue asks nothing."""
    from launchkit import BIN, fresh_env, save, shell, tools
    from test_launch_e2e import HOST, profile

    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    env = polaris(tmp_path, nodes=1)
    jobid, nodefile = env["PBS_JOBID"], Path(env["PBS_NODEFILE"])
    nodefile.write_text(f"{HOST}\n")
    bindir = tools(tmp_path / "bin")
    said = {"run_count=3": qstat_f(jobid, run_count=3).encode(),
            "latin-1 name": qstat_f(jobid, run_count=3, Job_Name="caf\u00e9").replace("\\u00e9", "\u00e9").encode("latin-1"),
            "exit 1": b"", "garbage": b"{not json", "deep": b"{\"Jobs\": " + b"[" * 100000}[answer]
    (tmp_path / "answer").write_bytes(said)
    rc = 1 if answer == "exit 1" else 0
    (bindir / "qstat").write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/asked\ncat {tmp_path}/answer\nexit {rc}\n")
    (bindir / "qstat").chmod(0o755)
    home = tmp_path / "home"
    profile(home, "polaris-here", "pbs", "[mpiexec, --launcher, fork, -n, '{nranks}', -ppn, '{ppn}', "
            "--hostfile, '{hostfile}']")
    fresh = fresh_env(home, f"{bindir}:/usr/bin:/bin")
    save({**fresh, **env, "JOBENV_RANKS_PER_HOST": "2"}, "--profile", "polaris-here")
    prog = "sh -c 'echo \"count=$JOBENV_RESTART_COUNT\"; [ $JOBENV_RESTART_COUNT != " + count + " ] || exit 3'"
    p = shell(fresh, f"jobenv launch --job {jobid} --requeue --retries 1 -- {prog}")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    counts = sorted(line for line in p.stdout.splitlines() if line.startswith("count="))
    assert counts == [f"count={count}"] * 2 + [f"count={int(count) + 1}"] * 2, p.stdout + p.stderr
    asked = (tmp_path / "asked").read_text().splitlines()
    # once at the start for the run count, once by the launch's liveness check (pbs.query): both `qstat -x`
    assert asked.count(f"-x -f -F json {jobid}") == 2, asked
    (tmp_path / "asked").unlink()
    p = shell(fresh, f"jobenv launch --job {jobid} -- sh -c 'echo count=$JOBENV_RESTART_COUNT'")
    assert p.returncode == 0 and p.stdout.split() == ["count=0", "count=0"], p.stdout + p.stderr
    assert (tmp_path / "asked").read_text().splitlines().count(f"-x -f -F json {jobid}") == 1  # liveness alone


def test_slurm_show_job_reads_a_name_whole_and_trusts_no_forged_field():
    """A job name holding `StdOut=` words is the name (scontrol prints it at the end of the
    first line); one holding a newline forges lines: no flag is read from such an answer."""
    named = slurm.parse_show_job(SHOW_JOB.replace("JobName=sbatch", "JobName=train.sh StdOut=/root/.bashrc WorkDir=/tmp"))
    assert "--output=/home/alice/proj/job-1.out" in named.submit and "--chdir=/home/alice/proj" in named.submit
    assert "--job-name=train.sh StdOut=/root/.bashrc WorkDir=/tmp" in named.submit and named.workdir == "/home/alice/proj"
    forged = slurm.parse_show_job(SHOW_JOB.replace("JobName=sbatch", "JobName=x\n   StdOut=/root/.bashrc"))
    assert (forged.submit, forged.state, forged.workdir, forged.restarts) == ((), "", "", None)
    assert "ambiguous" in forged.why and "no flag" in forged.why
    # and no resubmission of a dumped script without the job's flags (its size, output, directory)
    argv, _, why = preempt.resubmission(forged, slurm.REQUEUE, "/tmp/dumped-batch-script")
    assert argv == [] and "ambiguous" in why
