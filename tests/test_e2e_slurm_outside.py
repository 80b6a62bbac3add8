"""`jobenv save --job ID` on the real Slurm cluster (tests/cluster/slurm.py): a batch job that
never ran jobenv is captured from the submit host, outside the allocation, and `launch`
runs a command on every node of it; with no ID, the job is found from one of its nodes."""
from __future__ import annotations

import json
import re
import time

import pytest

from conftest import REPO
from test_e2e_slurm import PY, cluster, fresh, jobs, store  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


def never_saved(cluster, jobs, tmp_path, *args: str, body: str = "exec sleep 300") -> str:  # noqa: F811
    """A batch job that never runs jobenv (by default it only sleeps)."""
    jobid = cluster.sbatch(f"#!/bin/bash\n{body}\n", *args, "-o", str(tmp_path / "job-%j.out"))
    jobs.append(jobid)
    cluster.wait_state(jobid, {"RUNNING"})
    return jobid


def save_outside(cluster, store, *args: str):  # noqa: F811
    env = cluster.env(JOBENV_HOME=store, PYTHONPATH=str(REPO))
    return cluster.run([PY, "-m", "jobenv", "save", *args], env=env, check=False)


def test_job_that_never_saved_is_captured_from_the_submit_host_and_launched_into(
        cluster, jobs, store, tmp_path):  # noqa: F811
    jobid = never_saved(cluster, jobs, tmp_path, "-N", "2")
    p = save_outside(cluster, store, "--job", jobid, "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["hosts"] == ["node1", "node2"] and rec["jobid"] == jobid and rec["created_on"] == cluster.hostname
    assert rec["provenance"]["command"] == f"scontrol show job -d {jobid}"
    assert rec["provenance"]["fields"]["hosts"] == "scontrol NodeList"
    assert rec["launch"][:3] == ["srun", f"--jobid={jobid}", "--overlap"]
    assert rec["env"]["SLURM_CONF"] == str(cluster.conf)  # the site's, for later queries from any shell
    show = fresh(cluster, None, "bash", f"jobenv show --job {jobid}", store)
    assert show.returncode == 0 and "captured from outside the job by `scontrol show job -d" in show.stdout
    assert "live (squeue says RUNNING)" in show.stdout  # liveness: the scheduler's word
    p = fresh(cluster, None, "bash", f"source <(jobenv get --job {jobid}) && launch hostname", store)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == ["node1", "node2"]  # one rank on every node of the job
    p = fresh(cluster, None, "bash", f"jobenv launch --job {jobid} --nhosts 1 --dry-run -- hostname", store)
    # re-sized, attached (and, for the venv's mpi4py, srun's --mpi type first: jobenv.launcher_fit.srun_world)
    # the attach flags are in the recorded template (added once, at capture); sizing puts --nodelist first
    assert re.search(rf"srun ('--mpi=\w+' )?--disable-status '--nodelist=node1' '--jobid={jobid}' --overlap -N 1 -n 1 ", p.stdout), p.stderr
    cluster.run(["scancel", jobid])
    cluster.wait_gone(jobid)
    p = fresh(cluster, None, "bash", f"jobenv show --job {jobid}", store)
    assert "ended (squeue says CANCELLED)" in p.stdout, p.stdout + p.stderr  # the one liveness rule


def test_no_id_finds_the_job_of_this_host(cluster, jobs, store, tmp_path):  # noqa: F811
    jobid = never_saved(cluster, jobs, tmp_path, "-N", "1", "-w", "node3")
    p = fresh(cluster, "node3", "bash", "jobenv save --job --json", store, SLURM_CONF=str(cluster.conf))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["jobid"] == jobid
    p = fresh(cluster, "node4", "bash", "jobenv save --job", store, SLURM_CONF=str(cluster.conf))
    assert p.returncode == 3 and p.stderr.startswith("jobenv: error: no running slurm job of root on node4")
    p = fresh(cluster, None, "bash", "jobenv save --job", store, SLURM_CONF=str(cluster.conf))  # no Slurm node
    assert p.returncode == 3 and "Invalid node name" in p.stderr and p.stderr.count("\n") == 1


def test_refusals_are_one_line(cluster, jobs, store, tmp_path):  # noqa: F811
    p = save_outside(cluster, store, "--job", "999999")
    assert p.returncode == 3 and p.stderr.count("\n") == 1 and "does not know job 999999" in p.stderr
    for bad in ("1;rm -rf ~", "$(id)", "1 2", "1_2"):
        p = save_outside(cluster, store, "--job", bad)
        assert p.returncode == 5 and p.stderr.count("\n") == 1 and "is not a slurm job id" in p.stderr, bad
    p = save_outside(cluster, store, "--job", "-1")  # never an option for scontrol: click's usage error
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    pending = cluster.sbatch("#!/bin/bash\nexec sleep 300\n", "-N", "4", "--begin", "now+1hour",
                             "-o", str(tmp_path / "p-%j.out"))
    jobs.append(pending)
    p = save_outside(cluster, store, "--job", pending)
    assert p.returncode == 5 and "PENDING, not running" in p.stderr


def test_launch_shares_nodes_with_a_step_that_holds_every_cpu(cluster, jobs, store, tmp_path):  # noqa: F811
    """The job's own step holds all its CPUs (srun sleep): a new step waits forever for
    them unless it overlaps, which a launch into a captured job does."""
    jobid = never_saved(cluster, jobs, tmp_path, "-N", "2", "--ntasks-per-node", str(cluster.cpus),
                        body="exec srun sleep 300")
    deadline = time.time() + 30
    while "sleep" not in cluster.run(["squeue", "-h", "-s", "-j", jobid, "-o", "%j"]).stdout:  # the step runs
        assert time.time() < deadline
        time.sleep(0.2)
    assert save_outside(cluster, store, "--job", jobid, "--quiet").returncode == 0
    p = fresh(cluster, None, "bash", f"jobenv launch --job {jobid} --timeout 30 -n 2 --ppn 1 -- hostname", store)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == ["node1", "node2"]



@pytest.mark.parametrize("name", ["sleep", "x UserId=root(0) NodeList=evilnode[1-2] WorkDir=/tmp/evil",
                                  "x\n   UserId=root(0) GroupId=root(0)"])
def test_another_users_job_is_refused(cluster, jobs, store, tmp_path, name):  # noqa: F811
    """A real job of the second local user (root submits it with --uid): refused by uid,
    whatever its state, and whatever its name says (scontrol prints it before UserId=: its
    `Key=Value` words are the name; one holding a newline makes the answer ambiguous)."""
    p = cluster.run(["sbatch", "--parsable", "--uid=jobenvmallory", "--gid=jobenvmallory", "-N", "1", "-D", "/tmp",
                     "-o", "/dev/null", "-J", name], input="#!/bin/sh\nexec sleep 300\n", check=False)
    if p.returncode != 0:
        pytest.skip(f"this Slurm has no sbatch --uid: {p.stderr.strip()}")
    jobid = p.stdout.strip().split(";")[0]
    jobs.append(jobid)
    p = save_outside(cluster, store, "--job", jobid)  # the owner is judged before the state
    assert p.returncode == 5 and p.stderr.count("\n") == 1, p.stderr
    assert ("is ambiguous" if "\n" in name else "belongs to 'jobenvmallory(1001)', not to you") in p.stderr
