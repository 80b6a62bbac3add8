"""Run history on the real 4-node Slurm cluster (tests/cluster): a selftest launched from a
compute node's fresh shell is listed by `jobenv runs`, and its `jobenv report --html`,
drawn by headless chromium, names every host in its SVG.

Run under `flock /tmp/jobenv-slurm.lock`: one cluster at a time on a machine.
"""
from __future__ import annotations

import json

import pytest

from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401 (fixtures)
from test_runs_html import dom, svgs

pytestmark = pytest.mark.e2e


def test_selftest_on_two_nodes_is_listed_and_reported(cluster, jobs, store, tmp_path):  # noqa: F811
    jobid = batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    p = fresh(cluster, "node1", "bash", "source <(jobenv get) && launch python3 -m jobenv.selftest -q --timeout 120",
              store)
    assert p.returncode == 0, p.stdout + p.stderr
    p = fresh(cluster, "node1", "bash", "source <(jobenv get) && launch false", store)
    assert p.returncode == 1
    p = fresh(cluster, None, "bash", "jobenv runs list --json", store)
    runs = json.loads(p.stdout)
    assert [(r["job"], r["nranks"], r["nhosts"], r["hosts"], r["launcher"], r["exit"]) for r in runs] == \
        [(jobid, 4, 2, "node[1-2]", "srun", 1), (jobid, 4, 2, "node[1-2]", "srun", 0)]
    assert runs[0]["first_failure"]["description"].endswith("exit code 1")
    page = tmp_path / "report.html"
    p = fresh(cluster, None, "bash", f"jobenv report {runs[1]['run']} --html {page}", store)
    assert p.returncode == 0, p.stderr
    pics = svgs(dom(page))
    assert ">node1</text>" in pics and ">node2</text>" in pics and ">rendezvous</text>" in pics
    assert all(f">rank {r}</text>" in pics for r in range(4))
