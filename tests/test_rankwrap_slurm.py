"""The per-rank wrapper under srun (--mpi=none, pmi2, pmix) across two nodes of the real
Slurm test cluster (tests/cluster/slurm.py).  Run under `flock /tmp/jobenv-slurm.lock`."""
from __future__ import annotations

import shlex

import pytest

from jobenv import rankwrap
from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401  (fixtures)
from test_rankwrap import CHECK, check_ranks

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mpi", ["none", "pmi2", "pmix"])
def test_srun_two_nodes(cluster, jobs, store, tmp_path, mpi):  # noqa: F811
    if mpi != "none":
        listed = cluster.run(["srun", "--mpi=list"], check=False)
        if mpi not in listed.stdout + listed.stderr:
            pytest.skip(f"this Slurm has no {mpi} plugin")
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    wrapper = " ".join(rankwrap.wrapper_argv())
    # from a fresh shell on node2 with the job restored, srun over both nodes
    p = fresh(cluster, "node2", "bash",
              f"source <(jobenv get) && unset MASTER_ADDR MASTER_PORT && "
              f"srun --mpi={mpi} -N 2 -n 4 --ntasks-per-node 2 {wrapper} /bin/sh -c {shlex.quote(CHECK)}",
              store)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = check_ranks(p.stdout, 4, "srun")
    for r in rows:  # block placement: ranks 0,1 on node1, 2,3 on node2; master is the step's first node
        assert int(r[4]) == int(r[0]) // 2 and int(r[1]) == int(r[0]) % 2 and r[5] == "node1"
