"""The three user flows on a real multi-host Slurm cluster (tests/cluster/slurm.py).

Each "fresh shell" is `env -i` inside a node's network and UTS namespaces, as after
`ssh nodeN`: nothing is inherited but HOME, PATH and JOBENV_HOME.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.e2e
PYBIN = str(Path(sys.executable).parent)
PY = sys.executable


@pytest.fixture
def cluster(slurm_cluster):
    """The session's Slurm cluster (tests/conftest.py), under the name these modules use."""
    return slurm_cluster


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "jobenv-home"
    return str(d)


@pytest.fixture
def jobs(cluster):
    """Job ids to cancel after the test, whatever happens.

    It waits until each holds no node: a node still completing the last test's job is
    skipped by the next allocation, and tests here name the nodes they expect (node1, node2).
    """
    ids = []
    yield ids
    for j in ids:
        cluster.run(["scancel", j], check=False)
    for j in ids:
        cluster.wait_settled(j)


def fresh(cluster, node, shell, script, store, **extra):
    """Run SCRIPT in a fresh SHELL on NODE (None: the submit host)."""
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:/usr/bin:/bin", "JOBENV_HOME": store,
           "PYTHONPATH": str(REPO), "GLOO_SOCKET_IFNAME": "eth0" if node else "lo", "OMP_NUM_THREADS": "1",
           **extra}
    flags = {"bash": ["--norc", "--noprofile"], "zsh": ["-f"]}[shell]
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], f"/usr/bin/{shell}", *flags, "-c", script]
    if node:
        argv = cluster.on_node(node, argv)
    return subprocess.run(argv, capture_output=True, text=True, timeout=240)


def batch_job(cluster, jobs, store, tmp_path, *sbatch_args, save_args="", env=None, hold=600) -> str:
    """Submit a job whose script runs `jobenv save` and then holds the allocation `hold` s."""
    marker = tmp_path / f"saved-{len(jobs)}"
    script = (f"#!/bin/bash\nexport JOBENV_HOME={store}\n{PY} -m jobenv save --quiet {save_args} "
              f"2> {marker}.err && touch {marker}\nexec sleep {int(hold)}\n")
    jobid = cluster.sbatch(script, *sbatch_args, "-o", str(tmp_path / "job-%j.out"), env=env)
    jobs.append(jobid)
    cluster.wait_state(jobid, {"RUNNING"})
    deadline = time.time() + 60
    while not marker.exists():
        assert time.time() < deadline, f"jobenv save did not finish: {Path(str(marker) + '.err').read_text()}"
        time.sleep(0.1)
    return jobid


def selftest_report(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_batch_job_fresh_shell_on_compute_node(cluster, jobs, store, tmp_path, shell):
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    body = "whence -f launch" if shell == "zsh" else "type launch"
    show = (f"source <(jobenv get) && echo \"$SLURM_JOB_ID|$NHOSTS|$NRANKS|$SLURM_JOB_NODELIST|$SLURM_CONF\" && "
            f"cat \"$HOSTFILE\" && {body} && echo \"$DIST_LAUNCH\"")
    p = fresh(cluster, "node1", shell, show, store)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"{jobid}|2|4|node[1-2]|{cluster.conf}"
    assert lines[1:3] == ["node1", "node2"]
    assert "srun -N 2 -n 4 --ntasks-per-node 2" in p.stdout  # DIST_LAUNCH
    assert f"'launch' '--job' '{jobid}' '--'" in p.stdout  # `launch` is `jobenv launch --job ID --`
    report = tmp_path / "report.json"
    p = fresh(cluster, "node1", shell,
              f"source <(jobenv get) && launch python3 -m jobenv.selftest --timeout 120 --json-file {report}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = selftest_report(report)
    assert rep["ok"] and rep["world_size"] == 4 and rep["launcher"] == "srun"
    assert rep["ranks_per_host"] == {"node1": [0, 1], "node2": [2, 3]}
    assert "node1" in p.stdout and "PASSED" in p.stdout


@pytest.mark.parametrize("mpi,extra", [
    ("pmi2", {}),
    ("pmix", {"MPI4PY_LIBMPI": "/usr/lib/x86_64-linux-gnu/libmpi.so.40", "OMPI_MCA_btl": "self,tcp",
              "OMPI_MCA_btl_tcp_if_include": "eth0", "OMPI_MCA_oob_tcp_if_include": "eth0",
              "OMPI_MCA_pml": "ob1"}),
])
def test_srun_mpi_selftest(cluster, jobs, store, tmp_path, mpi, extra):
    pytest.importorskip("mpi4py")
    if mpi == "pmix" and mpi not in cluster.run(["srun", "--mpi=list"], check=False).stdout + \
            cluster.run(["srun", "--mpi=list"], check=False).stderr:
        pytest.skip("this Slurm has no pmix plugin")
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    report = tmp_path / "report.json"
    p = fresh(cluster, "node2", "bash", f"source <(jobenv get) && SLURM_MPI_TYPE={mpi} launch python3 -m "
              f"jobenv.selftest --framework mpi --timeout 120 --json-file {report}", store, **extra)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = selftest_report(report)
    assert rep["ok"] and rep["framework"] == "mpi" and rep["world_size"] == 4
    assert rep["ranks_per_host"] == {"node1": [0, 1], "node2": [2, 3]}
    lib = "Open MPI" if mpi == "pmix" else "MPICH"
    assert all(lib in r["device"] for r in rep["ranks"]), [r["device"] for r in rep["ranks"]]


def test_ended_job_is_refused(cluster, jobs, store, tmp_path):
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "1")
    cluster.run(["scancel", jobid])
    cluster.wait_gone(jobid)
    p = fresh(cluster, "node1", "bash", "jobenv get", store)
    assert p.returncode == 4 and f"job {jobid} has ended" in p.stderr and "Traceback" not in p.stderr
    p = fresh(cluster, "node1", "bash", "jobenv list --json", store)
    rows = json.loads(p.stdout)
    assert [r["state"] for r in rows if r["jobid"] == jobid] == ["ended"]
    p = fresh(cluster, "node1", "bash", "source <(jobenv get --allow-stale) && echo $JOBENV_JOBID", store)
    assert p.returncode == 0 and p.stdout.strip() == jobid


def test_two_jobs_on_different_nodes(cluster, jobs, store, tmp_path):
    a = batch_job(cluster, jobs, store, tmp_path, "-N", "1", "-w", "node3")
    b = batch_job(cluster, jobs, store, tmp_path, "-N", "1", "-w", "node4")
    for node, want in (("node3", a), ("node4", b)):
        p = fresh(cluster, node, "bash", "source <(jobenv get) && echo $SLURM_JOB_ID $JOBENV_JOBID && launch hostname",
                  store)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == [want, want, node]
    p = fresh(cluster, "node4", "bash", f"source <(jobenv get --job {a}) && echo $SLURM_JOB_ID && launch hostname", store)
    assert p.returncode == 0 and p.stdout.split() == [a, "node3"], p.stderr


def test_salloc_shell_on_submit_host(cluster, jobs, store, tmp_path):
    marker = tmp_path / "salloc-saved"
    stop = tmp_path / "salloc-stop"
    script = (f"JOBENV_HOME={store} {PY} -m jobenv save --quiet 2> {marker}.err; touch {marker}; "
              f"while [ ! -e {stop} ]; do sleep 0.1; done")
    name = f"jobenv-salloc-{os.getpid()}"
    proc = subprocess.Popen(["salloc", "-J", name, "-N", "2", "--ntasks-per-node", "1", "bash", "-c", script],
                            env=cluster.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.time() + 60
        while not marker.exists():
            assert time.time() < deadline and proc.poll() is None, "salloc's jobenv save did not finish"
            time.sleep(0.1)
        warn = Path(f"{marker}.err").read_text()
        assert "outside job" in warn and cluster.hostname in warn
        p = fresh(cluster, None, "bash", "source <(jobenv get) && launch hostname", store)
        assert p.returncode == 0, p.stderr
        assert sorted(p.stdout.split()) == ["node1", "node2"]
        assert "is not part of job" in p.stderr  # the submit host is not in the job
    finally:
        stop.touch()  # salloc's command ends, and salloc relinquishes the allocation
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.run(["scancel", "-n", name], check=False)
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def test_interactive_step_records_the_job(cluster, jobs, store, tmp_path):
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "1")
    p = cluster.run(["srun", "--jobid", jobid, "-N1", "-n1", "--overlap", "bash", "-c",
                     f"JOBENV_HOME={store} {PY} -m jobenv save --json"])
    rec = json.loads(p.stdout)
    assert rec["hosts"] == ["node1", "node2"] and rec["jobid"] == jobid
    for gone in ("SLURM_STEP_ID", "SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_NNODES", "SLURM_NODELIST"):
        assert gone not in rec["env"]


def test_stale_variables_do_not_mix_jobs(cluster, jobs, store, tmp_path):
    stale = {"PBS_JOBID": "1234.oldpbs", "PBS_NODEFILE": "/nonexistent/aux/1234.oldpbs"}
    env = cluster.env(**stale)
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "1", env=env)
    rec = json.loads(fresh(cluster, "node1", "bash", f"jobenv show --json --job {jobid}", store).stdout)
    assert rec["scheduler"] == "slurm" and not any(k.startswith("PBS_") for k in rec["env"])
    leftovers = {"SLURM_JOB_ID": "999999", "SLURM_JOBID": "999999", "SLURM_JOB_NODELIST": "gone[1-8]",
                 "SLURM_NNODES": "8", "SLURM_OLD_ONLY": "x", "PBS_JOBID": "1234.oldpbs"}
    p = fresh(cluster, "node1", "bash",
              f"source <(jobenv get --job {jobid}) && echo \"$SLURM_JOB_ID $SLURM_JOB_NODELIST "
              "${SLURM_OLD_ONLY-unset} ${PBS_JOBID-unset} ${SLURM_NNODES-unset}\" && launch hostname", store,
              **leftovers)
    assert p.returncode == 0, p.stderr
    out = p.stdout.split()
    assert out[:5] == [jobid, "node[1-2]", "unset", "unset", "2"]
    assert sorted(out[5:]) == ["node1", "node2"]


def test_watch_marks_job_ended_when_slurm_says_so(cluster, jobs, store, tmp_path):
    """`jobenv save --watch` in the batch script; after scancel the record flips to ended
    within two heartbeats, and a fresh shell without squeue refuses the job."""
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "1", save_args="--watch --watch-interval 0.5")
    path = Path(store) / "jobs" / f"slurm-{jobid}.json"
    deadline = time.time() + 10
    while "heartbeat" not in json.loads(path.read_text())["status"]:
        assert time.time() < deadline, "no heartbeat from jobenv watch"
        time.sleep(0.1)
    cluster.run(["scancel", jobid])
    t = time.time()
    while json.loads(path.read_text())["status"].get("state") != "ended":
        assert time.time() - t < 1.0 + 2, "record not marked ended within two heartbeats of the job's end"
        time.sleep(0.05)
    status = json.loads(path.read_text())["status"]
    assert "squeue" in status["reason"] or "SIGTERM" in status["reason"], status
    # a node without Slurm's commands: liveness comes from the record alone
    p = fresh(cluster, "node1", "bash", "jobenv get", store, PATH=f"{PYBIN}:/nonexistent")
    assert p.returncode == 4 and f"job {jobid} has ended" in p.stderr


# ---------------------------------------------------------------- submit, status, logs, cancel
def test_logs_of_a_saved_job_launched_into_with_and_without_log_dir(cluster, jobs, store, tmp_path):
    """A job saved inside its allocation (never submitted by jobenv), launched into from a
    node: `logs -j ID` from the login node finds each launch's rank logs from run history."""
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    say = "sh -c 'echo \"$0 rank $RANK on $(hostname)\"'"
    for flags, name in ((f"--log-dir {tmp_path / 'ranklogs'}", "logged"), ("", "unlogged")):
        p = fresh(cluster, "node1", "bash", f"jobenv launch --job {jobid} {flags} -- {say} {name}", store)
        assert p.returncode == 0, p.stdout + p.stderr
    logs = _jobenv(cluster, store, tmp_path, "logs", "-j", jobid)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    for rank, host in ((0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")):
        assert f"logged rank {rank} on {host}" in lines, logs.stdout
    hint = [ln for ln in lines if ln.startswith("--- run ") and "unlogged" in ln]
    assert len(hint) == 1 and "no per-rank logs" in hint[0] and "--log-dir DIR" in hint[0], logs.stdout
    one = _jobenv(cluster, store, tmp_path, "logs", "-j", jobid, "--rank", "3")
    assert [ln for ln in one.stdout.splitlines() if " rank " in ln and not ln.startswith("---")] == \
        ["logged rank 3 on node2"], one.stdout


def _jobenv(cluster, store, cwd, *args, timeout=120):
    env = cluster.env(JOBENV_HOME=store, PYTHONPATH=str(REPO), PATH=f"{PYBIN}:/usr/bin:/bin", OMP_NUM_THREADS="1")
    return subprocess.run([PY, "-m", "jobenv", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _follow_status(cluster, store, cwd, jobid, timeout=180):
    """`jobenv status` until it says ended; every state line it printed on the way."""
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline:
        p = _jobenv(cluster, store, cwd, "status", "-j", jobid)
        assert p.returncode == 0, p.stderr
        state = next(ln.split(None, 1)[1] for ln in p.stdout.splitlines() if ln.startswith(" state") or
                     ln.startswith("state"))
        seen.append(state.strip())
        if state.startswith("ended"):
            return seen, p.stdout
        time.sleep(0.3)
    raise AssertionError(f"job {jobid} did not end: {seen[-5:]}")


def test_submit_status_logs_cancel(cluster, jobs, store, tmp_path):
    """`submit` of a 2-node job runs the command on 4 ranks; `status` follows it to its end;
    `logs` shows every rank's lines; `cancel` of a second job ends it."""
    cmd = 'echo "hello from rank $RANK of $WORLD_SIZE on $(hostname)"'
    p = _jobenv(cluster, store, tmp_path, "submit", "--profile", "slurm", "--nodes", "2", "--ranks-per-host", "2",
                "--time", "5", "--timeout", "120", "--", "sh", "-c", cmd)
    assert p.returncode == 0, p.stderr
    jobid = p.stdout.strip()
    assert jobid.isdigit(), p.stdout
    jobs.append(jobid)
    env = cluster.env(JOBENV_HOME=store, PYTHONPATH=str(REPO), PATH=f"{PYBIN}:/usr/bin:/bin")
    follow = subprocess.Popen([PY, "-m", "jobenv", "logs", "-f", "-j", jobid], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, out = _follow_status(cluster, store, tmp_path, jobid)
    followed, err = follow.communicate(timeout=60)  # -f returns by itself once the job has ended
    assert follow.returncode == 0, err
    assert all(f"hello from rank {r} of 4" in followed for r in range(4)), followed
    assert seen[-1].startswith("ended (COMPLETED") or seen[-1].startswith("ended (finished"), seen
    assert "exit" in out and ("0:0" in out or " 0" in out), out
    logs = _jobenv(cluster, store, tmp_path, "logs", "-j", jobid)
    assert logs.returncode == 0, logs.stderr
    for rank, host in ((0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")):
        assert f"hello from rank {rank} of 4 on {host}" in logs.stdout, logs.stdout
    one = _jobenv(cluster, store, tmp_path, "logs", "-j", jobid, "--rank", "2")
    assert "rank 2 of 4" in one.stdout and "rank 1 of 4" not in one.stdout, one.stdout
    # a second job, cancelled while it runs
    p = _jobenv(cluster, store, tmp_path, "submit", "--profile", "slurm", "--nodes", "1", "--time", "5",
                "--", "sleep", "300")
    assert p.returncode == 0, p.stderr
    second = p.stdout.strip()
    jobs.append(second)
    cluster.wait_state(second, {"RUNNING"})
    # named after its command, not `jobenv`; stderr says where its output goes
    name = cluster.run(["squeue", "-h", "-j", second, "-o", "%j"]).stdout.strip()
    assert name == "sleep", name
    out_file = re.search(r"its output goes to (\S+/job\.out),", p.stderr).group(1)  # type: ignore[union-attr]
    assert f"submitted sleep as slurm job {second}" in p.stderr and os.path.isfile(out_file), p.stderr
    c = _jobenv(cluster, store, tmp_path, "cancel", "-j", second)
    assert c.returncode == 0 and f"cancelled slurm job {second}" in c.stdout, c.stdout + c.stderr
    seen, out = _follow_status(cluster, store, tmp_path, second, timeout=60)
    assert "CANCELLED" in seen[-1] or "143" in out, (seen, out)
