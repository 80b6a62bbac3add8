"""`launch python3 -m jobenv.selftest --bandwidth` across hosts of the real Slurm cluster
(tests/cluster/slurm.py): gloo between two hosts' network namespaces over eth0."""
from __future__ import annotations

import json

import pytest

from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def test_bandwidth_within_and_between_hosts(cluster, jobs, store, tmp_path):  # noqa: F811
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    report = tmp_path / "report.json"
    p = fresh(cluster, "node1", "bash", "source <(jobenv get) && launch python3 -m jobenv.selftest --bandwidth "
              f"--timeout 120 --json-file {report}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(report.read_text())
    fab = rep["fabric"]
    assert rep["ok"] and rep["ranks_per_host"] == {"node1": [0, 1], "node2": [2, 3]}
    for kind in ("intra", "inter"):
        assert fab["bandwidth"][kind]["groups"] == 2 and all(r["busbw"] > 0 for r in fab["bandwidth"][kind]["rows"])
    assert [(t["network"], t["interfaces"], sorted(t["hosts"])) for t in fab["transports"]] == \
        [("tcp", ["eth0"], ["node1", "node2"])]
    assert fab["verdict"]["status"] == "ok"
    assert "all-reduce bandwidth" in p.stdout and "transport (gloo)" in p.stdout and "fabric OK" in p.stdout
    print("\n" + "\n".join(ln for ln in p.stdout.splitlines() if ln.startswith(("between", "intra", "inter"))))
