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
import sys
import time
from pathlib import Path

import pytest

from cluster.flux import FluxCluster, available
from conftest import REPO

pytestmark = pytest.mark.e2e
PYBIN = str(Path(sys.executable).parent)
PY = sys.executable


@pytest.fixture(scope="module")
def cluster():
    why = available()
    if why:
        pytest.skip(why)
    c = FluxCluster().start()
    print(f"\nFlux instance up in {c.startup_seconds:.2f} s")
    yield c
    c.stop()


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "jobenv-home")


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
    env = shell_env(cluster, host, store, **extra)
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "--noprofile", "-c", script]
    return cluster.hosts.run(host, argv, check=False, timeout=240)


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
