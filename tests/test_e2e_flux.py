"""jobenv on a real 3-host Flux instance (tests/cluster/flux.py): save in a `flux batch`
job, restore in a fresh shell on another host of the job and launch the selftest there
with `flux run` across hosts; submit/status/cancel.

Each "fresh shell" is `env -i` inside a host's network and UTS namespaces, as after
`ssh fluxN`, with flux on PATH and FLUX_URI naming the system instance.
Run under `flock /tmp/jobenv-cluster.lock`.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cluster import e2e
from cluster.e2e import PY, PYBIN, cluster_fixture, run_fresh
from cluster.flux import FluxCluster, available
from conftest import REPO

pytestmark = pytest.mark.e2e
store = e2e.store  # the fixture
cluster = cluster_fixture(FluxCluster, available, "Flux instance")


@pytest.fixture
def jobs(cluster):
    ids = []
    yield ids
    for j in ids:
        cluster.run("flux1", [cluster.flux, "cancel", j], check=False)
    for j in ids:
        try:
            cluster.wait_inactive(j, timeout=60)
        except (TimeoutError, RuntimeError):
            pass


def shell_env(cluster, host, store, **extra):
    return {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:{cluster.prefix}/bin:/usr/bin:/bin",
            "JOBENV_HOME": store, "PYTHONPATH": str(REPO), "FLUX_URI": cluster.uri(host),
            "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", **extra}


def fresh(cluster, host, script, store, **extra):
    return run_fresh(cluster, host, shell_env(cluster, host, store, **extra), script)


def batch_job(cluster, jobs, store, tmp_path, nodes=2) -> str:
    """`flux batch -N nodes` of a script that saves (2 ranks per host, no GPUs) and holds."""
    marker = tmp_path / f"saved-{len(jobs)}"
    script = tmp_path / f"batch-{len(jobs)}.sh"
    script.write_text(f"#!/bin/bash\n{PY} -m jobenv save --quiet --gpus-per-host 0 --ranks-per-host 2 "
                      f"2> {marker}.err; touch {marker}\nexec sleep 600\n")
    p = fresh(cluster, "flux1", f"flux batch -N {nodes} --output={tmp_path}/batch.out {script}", store)
    assert p.returncode == 0, p.stderr
    jobid = p.stdout.strip()
    jobs.append(jobid)
    deadline = time.time() + 120
    while not marker.exists():
        assert time.time() < deadline, f"jobenv save did not finish in the batch job: {p.stdout}"
        time.sleep(0.2)
    err = Path(f"{marker}.err").read_text()
    assert "Traceback" not in err, err
    return jobid


def test_batch_job_restored_on_another_host_launches_the_selftest_across_hosts(cluster, jobs, store, tmp_path):
    jobid = batch_job(cluster, jobs, store, tmp_path)
    p = fresh(cluster, "flux2", 'source <(jobenv get) && echo "$JOBENV_JOBID|$NHOSTS|$NRANKS" && cat "$HOSTFILE"',
              store)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"{jobid}|2|4", lines
    assert len(set(lines[1:])) == 2 and set(lines[1:]) <= set(cluster.names), lines
    report = tmp_path / "report.json"
    p = fresh(cluster, "flux2",
              f"source <(jobenv get) && launch python3 -m jobenv.selftest --timeout 120 --json-file {report}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(report.read_text())
    assert rep["ok"] and rep["world_size"] == 4
    assert sorted(rep["ranks_per_host"]) == sorted(set(lines[1:]))


def test_submit_status_cancel(cluster, jobs, store, tmp_path):
    # the Flux profile (El Capitan's) asks one GPU per rank; these hosts have none
    p = fresh(cluster, "flux1", f"cd {tmp_path} && jobenv submit --profile elcapitan --nodes 2 --ranks-per-host 1 "
              "--time 10 -- sleep 600", store, JOBENV_GPUS_PER_HOST="0")
    assert p.returncode == 0, p.stderr
    jobid = p.stdout.strip().splitlines()[-1]
    jobs.append(jobid)
    deadline = time.time() + 60
    while True:
        st = fresh(cluster, "flux1", f"jobenv status -j {jobid}", store)
        if "running" in st.stdout.lower() or time.time() > deadline:
            break
        time.sleep(0.5)
    assert st.returncode == 0 and "running" in st.stdout.lower(), st.stdout + st.stderr
    c = fresh(cluster, "flux1", f"jobenv cancel -j {jobid}", store)
    assert c.returncode == 0, c.stderr
    cluster.wait_inactive(jobid, timeout=60)


def launch_behind(cluster, host, store, tmp_path, args: str):
    """`launch ARGS` of the saved job from a fresh shell on HOST, left running (its output in
    launch.out, its exit code in launch.rc); the Popen."""
    import subprocess

    script = tmp_path / "launch.sh"
    script.write_text(f"source <(jobenv get) || exit 9\nlaunch {args} > {tmp_path}/launch.out 2>&1\n"
                      f"echo $? > {tmp_path}/launch.rc\n")
    env = shell_env(cluster, host, store)
    argv = [*cluster.hosts.enter(host), "env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc",
            "--noprofile", str(script)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_file(path: Path, timeout: float, why) -> str:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            pytest.fail(why())
        time.sleep(0.3)
    return path.read_text()


def test_kill_from_a_fresh_shell_on_another_host_ends_every_rank(cluster, jobs, store, tmp_path):
    import subprocess

    batch_job(cluster, jobs, store, tmp_path)
    mark = f"jobenv-kill-test-{os.getpid()}"
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(300)\n")
    proc = launch_behind(cluster, "flux1", store, tmp_path, f"python3 {tmp_path}/sleeper.py {mark}")
    deadline = time.time() + 90
    while len(subprocess.run(["pgrep", "-f", f"sleeper.py {mark}"], capture_output=True, text=True).stdout.split()) < 4:
        assert time.time() < deadline, (tmp_path / "launch.out").read_text()
        time.sleep(0.3)
    p = fresh(cluster, "flux2", "source <(jobenv get) && jobenv kill", store)
    out = lambda: (tmp_path / "launch.out").read_text()  # noqa: E731
    assert p.returncode == 0 and "ended 4 rank(s) (0; 1; 2; 3) on 2 host(s)" in p.stderr, p.stderr + out()
    wait_file(tmp_path / "launch.rc", 30, lambda: "the launch did not end: " + out())
    proc.wait(timeout=30)
    left = e2e.left_running(f"sleeper.py {mark}")
    assert not left, f"outlived jobenv kill: {left}"


def test_a_rank_killed_on_the_second_host_is_named_with_its_host(cluster, jobs, store, tmp_path):
    import re

    batch_job(cluster, jobs, store, tmp_path)
    hosts = fresh(cluster, "flux1", 'source <(jobenv get) && cat "$HOSTFILE"', store).stdout.split()
    prog = "sh -c 'if [ $RANK = 3 ]; then sleep 3; kill -9 $$; fi; sleep 300'"
    proc = launch_behind(cluster, "flux1", store, tmp_path, prog)
    out = lambda: (tmp_path / "launch.out").read_text() if (tmp_path / "launch.out").exists() else ""  # noqa: E731
    rc = wait_file(tmp_path / "launch.rc", 120, lambda: "the launch did not end: " + out())
    proc.wait(timeout=30)
    found = re.search(r"jobenv: rank 3 on (\S+) failed(?: first)?: signal 9 \(SIGKILL\)", out())
    assert rc.strip() != "0" and found and found.group(1) == hosts[1], (hosts, out())


def test_requeue_says_flux_has_none(cluster, jobs, store, tmp_path):
    """flux-core (v0.88) has no requeue: `flux job` offers attach, status, last, urgency, wait,
    kill, killall, raise, raiseall, taskmap, timeleft, purge, info, hostpids, and a job never
    goes back from RUN to SCHED.  A `--requeue` launch says so at once and runs no less."""
    batch_job(cluster, jobs, store, tmp_path)
    p = fresh(cluster, "flux1", "source <(jobenv get) && launch --requeue -- true", store)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "jobenv: warning: --requeue: jobenv cannot requeue or resubmit a flux job" in p.stderr, p.stderr
