"""Pre-emption, requeue, `jobenv kill` and launch's fresh liveness on the real 4-node Slurm
cluster (tests/cluster).

Run under `flock /tmp/jobenv-slurm.lock`: one cluster at a time on a machine.
"""
from __future__ import annotations

import os
import stat

import pytest

from conftest import REPO
from test_e2e_slurm import PY, batch_job, cluster, fresh, jobs, store  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def srun_tracer(tmp_path) -> str:
    """A directory whose `srun` notes that it ran, then is the real srun."""
    d = tmp_path / "trace-bin"
    d.mkdir()
    prog = d / "srun"
    prog.write_text(f"#!/bin/sh\ntouch {tmp_path}/srun-ran\nexec /usr/bin/srun \"$@\"\n")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return str(d)


def test_launch_refuses_a_job_cancelled_within_the_cache_minute(cluster, jobs, store, tmp_path):  # noqa: F811
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "1")
    p = fresh(cluster, "node1", "bash", "jobenv get > /dev/null", store)  # caches "live" for a minute
    assert p.returncode == 0, p.stderr
    cluster.run(["scancel", jobid])
    cluster.wait_gone(jobid)
    tracer = srun_tracer(tmp_path)
    p = fresh(cluster, "node1", "bash", f"PATH={tracer}:$PATH jobenv launch --job {jobid} -- hostname", store)
    assert p.returncode == 4, p.stdout + p.stderr
    assert f"job {jobid} has ended" in p.stderr and "Traceback" not in p.stderr
    assert not os.path.exists(tmp_path / "srun-ran"), "a launcher ran into the ended job"
    # the cached verdict serves `get` no longer either: launch refreshed it
    p = fresh(cluster, "node1", "bash", f"jobenv get --job {jobid}", store)
    assert p.returncode == 4 and f"job {jobid} has ended" in p.stderr


CKPT = r'''
import os, signal, socket, sys, time
d, rank, again = sys.argv[1], os.environ["RANK"], os.environ.get("JOBENV_RESTART_COUNT")
host = socket.gethostname()
print(f"rank {rank} on {host} up, JOBENV_RESTART_COUNT={again}", flush=True)
open(f"{d}/start-{again}-{rank}", "w").write(host)
if again != "0":
    state = open(f"{d}/ckpt-{rank}").read()
    open(f"{d}/done-{rank}", "w").write(f"{again} {state}")
    print(f"rank {rank} resumed from {state}", flush=True)
    sys.exit(0)
def checkpoint(signum, frame):
    open(f"{d}/ckpt-{rank}", "w").write(f"step-7-{host}")
    print(f"rank {rank} checkpointed on SIG{signal.Signals(signum).name[3:]}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGUSR1, checkpoint)
time.sleep(300)
'''


def requeue_script(store, work, grace=20):  # noqa: F811
    return (f"#!/bin/bash\nexport JOBENV_HOME={store} PYTHONPATH={REPO}\n{PY} -m jobenv save --quiet || exit 1\n"
            f"exec {PY} -m jobenv launch --requeue --grace {grace} -- {PY} {work}/ckpt.py {work}\n")


def wait_for(paths, timeout, what, log=None):
    import time

    deadline = time.time() + timeout
    while not all(os.path.exists(p) for p in paths):
        assert time.time() < deadline, f"{what}: missing {[p for p in paths if not os.path.exists(p)]}" + (
            "\n" + log.read_text() if log and log.exists() else "")
        time.sleep(0.2)


def until_said(out, *words, timeout=30):
    """The job's output once it holds every one of `words` (it is written as the launch copies it)."""
    import time

    deadline = time.time() + timeout
    text = out.read_text()
    while not all(w in text for w in words) and time.time() < deadline:
        time.sleep(0.2)
        text = out.read_text()
    return text


def preempted_job(cluster, jobs, store, tmp_path, *sbatch_args):  # noqa: F811
    """A 2-node job whose batch script execs `jobenv launch --requeue`, pre-empted by hand
    (`scancel --signal=USR1 --batch`, what `--signal=B:USR1@90` does at the time limit)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "ckpt.py").write_text(CKPT)
    out = tmp_path / "job.out"
    jobid = cluster.sbatch(requeue_script(store, work), "-N", "2", "--ntasks-per-node", "1", "-o", str(out),
                           "--open-mode=append", *sbatch_args)
    jobs.append(jobid)
    wait_for([work / "start-0-0", work / "start-0-1"], 90, "attempt 1's ranks did not start", out)
    cluster.run(["scancel", "--signal=USR1", "--batch", jobid])
    wait_for([work / "ckpt-0", work / "ckpt-1"], 30, "the ranks were not told to checkpoint", out)
    return jobid, work, out


def test_preemption_requeues_and_attempt_2_resumes(cluster, jobs, store, tmp_path):  # noqa: F811
    jobid, work, out = preempted_job(cluster, jobs, store, tmp_path, "--requeue")
    cluster.wait_state(jobid, {"PENDING"}, timeout=60)  # requeued; held for AuthInfo=cred_expire (30 s)
    wait_for([work / "done-0", work / "done-1"], 120, "attempt 2 did not resume", out)
    for r in (0, 1):
        assert (work / f"done-{r}").read_text().split()[0] == "1"  # JOBENV_RESTART_COUNT=1
        assert (work / f"done-{r}").read_text().split()[1].startswith("step-7-node")
    assert len({(work / f"start-0-{r}").read_text() for r in (0, 1)}) == 2  # attempt 1's marks kept
    text = until_said(out, "rank 0 resumed", "rank 1 resumed")
    assert "rank 0 checkpointed on SIGUSR1" in text and "rank 1 checkpointed on SIGUSR1" in text, text
    assert f"requeueing job {jobid}: scontrol requeue {jobid}" in text, text
    assert "JOBENV_RESTART_COUNT=0" in text and "rank 1 resumed from step-7-node" in text, text
    runs = os.listdir(os.path.join(store, "runs", f"slurm-{jobid}"))
    assert len(runs) == 2, runs  # each attempt's run directory, the first one intact


def test_scancel_of_a_requeue_launch_is_not_brought_back(cluster, jobs, store, tmp_path):  # noqa: F811
    """`scancel` sends the batch shell SIGTERM too, and Slurm says COMPLETING at once (never
    CANCELLED while the job winds down): the launch must not take it for pre-emption."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "ckpt.py").write_text(CKPT)
    out = tmp_path / "job.out"
    jobid = cluster.sbatch(requeue_script(store, work, grace=5), "-N", "2", "--ntasks-per-node", "1", "-o",
                           str(out), "--open-mode=append", "--requeue")
    jobs.append(jobid)
    wait_for([work / "start-0-0", work / "start-0-1"], 90, "the ranks did not start", out)
    cluster.run(["scancel", jobid])
    text = until_said(out, "not brought back")
    assert f"job {jobid} is COMPLETING, no longer running" in text, text
    cluster.wait_settled(jobid)
    assert "requeueing" not in out.read_text() and not (work / "start-1-0").exists(), out.read_text()


def test_preemption_without_requeue_rights_resubmits_once(cluster, jobs, store, tmp_path):  # noqa: F811
    jobid, work, out = preempted_job(cluster, jobs, store, tmp_path, "--no-requeue")
    wait_for([work / "done-0", work / "done-1"], 120, "the resubmitted job did not resume", out)
    text = until_said(out, "rank 0 resumed", "rank 1 resumed")
    assert "Requested operation is presently disabled" in text and "resubmitting job" in text, text
    assert (work / "done-0").read_text().split()[0] == "1"  # JOBENV_RESTART_COUNT=1 in the new job
    assert "rank 0 resumed from step-7-node" in text, text  # the new job appended to the same output
    new = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i", "-n", "sbatch"], check=False).stdout.split()
    jobs.extend(j for j in new if j != jobid)


def test_kill_from_another_shell_leaves_no_rank(cluster, jobs, store, tmp_path):  # noqa: F811
    import subprocess
    import time

    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    mark = f"jobenv-kill-test-{os.getpid()}"
    (tmp_path / "sleeper.py").write_text("import time, sys\nprint('up', flush=True)\ntime.sleep(300)\n")
    launch = subprocess.Popen(cluster.on_node("node1", [
        "env", "-i", f"HOME={os.environ.get('HOME', '/root')}", f"JOBENV_HOME={store}", f"PATH={os.path.dirname(PY)}:/usr/bin:/bin",
        f"PYTHONPATH={REPO}", "bash", "-c", f"jobenv launch --job {jobid} -- python3 {tmp_path}/sleeper.py {mark}"]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        while len(subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split()) < 4:
            assert time.time() < deadline and launch.poll() is None, "the 4 ranks did not start"
            time.sleep(0.2)
        p = fresh(cluster, "node2", "bash", f"jobenv kill --job {jobid}", store)  # another shell, another node
        import glob
        dbg = subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout + "".join(
            f"{f}: {open(f).read()}" for f in sorted(glob.glob(f"{store}/runs/*/*/*")) if "rank-" in f)
        assert p.returncode == 0, p.stdout + p.stderr + dbg
        assert "ended 4 rank(s) (0; 1; 2; 3) on 2 host(s)" in p.stderr, p.stderr
        left = subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout
        assert not [ln for ln in left.splitlines() if "pgrep" not in ln], left  # no rank on any node
        launch.wait(timeout=30)  # and the launch itself ended
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, 9)
            launch.wait()



def test_resubmission_runs_the_script_slurm_ran_never_the_file_now_at_its_path(cluster, jobs, store, tmp_path,  # noqa: F811
                                                                              other_user, shared_tmp):
    """Issue 24: a job submitted from a shared directory whose script is deleted and replaced
    by another user's file, pre-empted where `scontrol requeue` is refused (--no-requeue):
    the resubmitted job runs the copy kept when the launch started, not the planted file."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "ckpt.py").write_text(CKPT)
    out = tmp_path / "job.out"
    script = shared_tmp / "job.sh"
    script.write_text(requeue_script(store, work))
    p = cluster.run(["sbatch", "--parsable", "-N", "2", "--ntasks-per-node", "1", "-o", str(out),
                     "--open-mode=append", "--no-requeue", str(script)])
    jobid = p.stdout.strip().split(";")[0]
    jobs.append(jobid)
    wait_for([work / "start-0-0", work / "start-0-1"], 90, "attempt 1's ranks did not start", out)
    script.unlink()  # the victim deletes it; the other user plants their own at that path
    pwned = shared_tmp / "pwned"
    other_user.sh(f"printf '#!/bin/sh\\nid > {pwned}\\n' > {script} && chmod 755 {script}")
    cluster.run(["scancel", "--signal=USR1", "--batch", jobid])
    import time

    deadline = time.time() + 150
    while not pwned.exists() and not all((work / f"done-{r}").exists() for r in (0, 1)) and time.time() < deadline:
        time.sleep(0.2)
    new = [j for j in cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"], check=False).stdout.split()
           if j.isdigit() and int(j) > int(jobid)]
    jobs.extend(new)
    assert not pwned.exists(), f"the planted script ran as the victim: {pwned.read_text()}" + out.read_text()
    wait_for([work / "done-0", work / "done-1"], 1, "the resubmitted job did not resume", out)
    text = until_said(out, "rank 0 resumed", "rank 1 resumed")
    kept = os.path.join(store, "scripts", f"slurm-{jobid}.sh")
    assert "resubmitting: sbatch" in text and kept in text and str(script) not in text.split("resubmitting:")[1], text
    assert open(kept).read() == requeue_script(store, work)  # kept when the launch started
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600 and stat.S_IMODE(os.stat(os.path.dirname(kept)).st_mode) == 0o700
    shown = cluster.run(["scontrol", "show", "job", new[0]], check=False).stdout if new else ""
    assert f"Command={kept}" in shown, shown
