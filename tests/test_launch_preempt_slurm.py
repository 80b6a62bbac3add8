"""Pre-emption, requeue, `jobenv kill` and launch's fresh liveness on the real 4-node Slurm
cluster (tests/cluster).

Run under `flock /tmp/jobenv-slurm.lock`: one cluster at a time on a machine.
"""
from __future__ import annotations

import os
import stat

import pytest

from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401 (fixtures)

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
