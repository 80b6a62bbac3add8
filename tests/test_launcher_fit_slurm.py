"""launcher_fit.srun_mpi on a real Slurm cluster (tests/cluster/slurm.py): the --mpi type it
picks from the venv's recorded MPI and `srun --mpi=list` starts mpi4py as one world; srun
without it (SLURM_MPI_TYPE unset, the cluster's default none) starts every rank as rank 0 of 1,
exits 0, and says nothing: the issue's 6 copies of rank 0."""
from __future__ import annotations

import sys

import pytest

from jobenv import launcher_fit
from jobenv.launch.plan.mpibuilds import mpi_builds

pytestmark = pytest.mark.e2e
SIZE = "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f'{c.Get_rank()}/{c.Get_size()}')"


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster  # the session's (tests/conftest.py)


def test_the_picked_mpi_type_makes_one_world_and_none_makes_singletons(cluster):
    pytest.importorskip("mpi4py")
    env = {k: v for k, v in cluster.env().items() if k != "SLURM_MPI_TYPE"}
    built = mpi_builds(sys.executable, env)
    assert built.get("mpi4py") == "MPICH", built  # the venv's MPICH wheel
    listed = cluster.run(["srun", "--mpi=list"], check=False, env=env)
    kind = launcher_fit.srun_mpi({"mpi4py": built["mpi4py"]}, listed.stdout + listed.stderr)
    assert kind == "pmi2", listed.stdout + listed.stderr
    run = ["srun", "-N", "2", "-n", "4", "--ntasks-per-node", "2"]
    alone = cluster.run([*run, sys.executable, "-c", SIZE], env=env, timeout=120)
    assert sorted(alone.stdout.split()) == ["0/1"] * 4, alone.stdout + alone.stderr  # silent singletons, exit 0
    world = cluster.run([*run, f"--mpi={kind}", sys.executable, "-c", SIZE], env=env, timeout=120)
    assert sorted(world.stdout.split()) == ["0/4", "1/4", "2/4", "3/4"], world.stdout + world.stderr
