"""`jobenv doctor`'s judges: pure functions of recorded banners, library strings and probe reports."""
from __future__ import annotations

import pytest

from jobenv.doctor.judges import judge_gpus, judge_imports, judge_launcher, judge_mpi4py, judge_torch, mpi_flavor


@pytest.mark.parametrize("text,flavor", [
    ("HYDRA build details:\n    Version:                                 5.0.2", "MPICH"),
    ("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "Open MPI"),
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022", "Open MPI"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)", "Intel MPI"),
    ("MPI VERSION    : CRAY MPICH version 8.1.28.2 (ANL base 3.4a2)", "Cray MPICH"),
    ("MPICH Version:      4.1.2\nMPICH Release date: Wed Jun  7 15:22:45 CDT 2023", "MPICH"),
    ("MVAPICH2 Version      :\t2.3.7", "MVAPICH"),
    ("slurm 22.05.8", "Slurm srun"),
    ("", None), ("usage: foo [-h]", None),
])
def test_mpi_flavor(text, flavor):
    assert mpi_flavor(text) == flavor


@pytest.mark.parametrize("launcher,library,status", [
    ("Open MPI", "MPICH", "fail"), ("MPICH", "Open MPI", "fail"), ("Cray PALS", "Open MPI", "fail"),
    ("MPICH", "MPICH", "ok"), ("Cray PALS", "Cray MPICH", "ok"), ("MPICH", "Intel MPI", "ok"),
    ("Slurm srun", "Open MPI", "ok"), (None, "MPICH", "ok"), ("MPICH", None, "warn"),
])
def test_judge_mpi4py(launcher, library, status):
    c = judge_mpi4py(launcher, library, f"{library} Version: 1.0")
    assert c.status == status and (c.fix != "") == (status == "fail")


def test_judge_gpus_and_torch():
    assert judge_gpus(4, 0, "CUDA_VISIBLE_DEVICES").status == "fail"
    assert judge_gpus(4, None, "").status == "warn"
    assert judge_gpus(0, None, "").status == "ok" and judge_gpus(4, 4, "nvidia-smi").status == "ok"
    cpu = {"version": "2.13.0+cpu", "distributed": True, "gloo": True}
    assert judge_torch(cpu, 0).status == "ok" and "gloo" in judge_torch(cpu, 0).detail
    assert judge_torch(cpu, 4).status == "fail"
    assert judge_torch({**cpu, "cuda": True, "devices": 4}, 4).status == "warn"  # CUDA without nccl
    assert judge_torch({**cpu, "cuda": True, "nccl": True, "devices": 4}, 4).status == "ok"
    assert judge_torch({**cpu, "distributed": False}, 0).status == "fail"


@pytest.mark.parametrize("exe,banner,flavor", [
    ("/opt/cray/pals/1.7/bin/mpiexec", "mpiexec version 1.7.1 revision 5b4c2f0 built Jun 12 2024", "Cray PALS"),
    ("/usr/bin/mpiexec", "mpiexec version 1.7.1 revision 5b4c2f0 built Jun 12 2024", "Cray PALS"),  # banner alone
    ("/opt/cray/pals/1.7/bin/mpiexec", "", "Cray PALS"),  # path alone
    ("/usr/bin/mpiexec", "HYDRA build details:\n    Version:  4.1.2", "MPICH"),
    ("/usr/tce/bin/flux", "commands:    \t\t0.59.0\nlibflux-core:\t\t0.59.0", "Flux"),
    ("/opt/ibm/jsm/bin/jsrun", "", "IBM jsrun"),
])
def test_judge_launcher_tells_pals_from_hydra(exe, banner, flavor):
    c = judge_launcher(exe, banner)
    assert c.status == "ok" and f"{exe}: {flavor} " in c.detail, c


@pytest.mark.parametrize("launcher,library,status", [
    ("IBM jsrun", "MPICH", "fail"), ("IBM jsrun", "Open MPI", "ok"), ("Flux", "MPICH", "ok"), ("Flux", "Open MPI", "ok"),
])
def test_judge_mpi4py_by_the_familys_mpi(launcher, library, status):
    assert judge_mpi4py(launcher, library, f"{library} Version: 1.0").status == status


def test_torch_is_asked_for_only_where_the_profile_configures_a_backend():
    """The selftest runs without torch: a missing torch warns only for a profile whose fabric
    names a torch backend (Polaris's nccl), not for a plain local or Slurm job."""
    missing = {"torch": (None, ""), "mpi4py": (None, "")}
    plain = {c.name: c for c in judge_imports(missing, "MPICH", 0)}
    assert plain["torch"].status == "ok" and "no framework configured" in plain["torch"].detail
    assert plain["mpi4py"].status == "ok"
    polaris = {c.name: c for c in judge_imports(missing, "Cray PALS", 4, None, ("nccl",))}
    assert polaris["torch"].status == "warn" and "nccl" in polaris["torch"].detail
    assert "pip install torch" in polaris["torch"].fix


def test_horovod_of_another_mpi_than_the_launchers_warns_by_launchs_rule():
    """doctor says what launch does: a program importing horovod (Open MPI) is refused under
    MPICH's mpiexec (launcher_fit.world_misfit); others run, so a warning, not a failure."""
    info = {"horovod": ({"version": "0.28.1", "mpi_built": True}, "")}
    c = judge_imports(info, "MPICH", 0, built={"horovod": "Open MPI"})[0]
    assert c.status == "warn" and "built with Open MPI, but the launcher is MPICH" in c.detail, c
    assert "refuses a program that imports horovod" in c.fix and "--launcher openmpi" in c.fix, c
    assert judge_imports(info, "Open MPI", 0, built={"horovod": "Open MPI"})[0].status == "ok"
    assert judge_imports(info, "MPICH", 0, built={})[0].status == "ok"  # gloo-only horovod: no MPI to split
