"""A plain DDP script (init_process_group("gloo"), no jobenv import) started with
`launch python3 train.py` from a fresh `env -i` shell trains under every launcher on this
host: the MPICH wheel's mpiexec, Debian's Open MPI mpirun, torchrun, and PBS- and
Cobalt-shaped jobs.  (srun: tests/test_launch_slurm.py.)"""
from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

import machines
from launchkit import (BIN, RESTORE, check_training, fresh_env, need_torch, save, shell,
                       tools, train_reports, write_train)

pytestmark = pytest.mark.e2e
HOST = socket.gethostname()
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}


def profile(home: Path, name: str, scheduler: str, argv: str) -> None:
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(f"name: {name}\nscheduler: {scheduler}\nlaunchers:\n  - argv: {argv}\n")


def train(tmp_path: Path, path: str, save_env: dict, save_args: list, fresh_extra: dict = None, world: int = 2):
    """save in the job's first shell; then `launch python3 train.py` from an empty environment."""
    need_torch()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = fresh_env(home, path, **(fresh_extra or {}))
    save({**env, **save_env}, *save_args)
    write_train(tmp_path)
    p = shell(env, f"{RESTORE} && launch python3 train.py", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    reports = train_reports(p.stdout)
    check_training(reports, world)
    return reports


def test_mpich_mpiexec_local(tmp_path):
    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    reps = train(tmp_path, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin", {}, ["--ranks-per-host", "2"])
    assert all("PMI_RANK" in r["launcher_view"] for r in reps)


def test_openmpi_mpirun_cobalt_shaped(tmp_path):
    if not Path("/usr/bin/mpirun.openmpi").exists():
        pytest.skip("Open MPI is not installed")
    home = tmp_path / "home"
    profile(home, "thetagpu-here", "cobalt", "[mpirun, --oversubscribe, -n, '{nranks}', -N, '{ppn}', --hostfile, "
            "'{hostfile}', -x, PATH, -x, LD_LIBRARY_PATH]")
    nodefile = tmp_path / "var/tmp/cobalt.10446"
    nodefile.parent.mkdir(parents=True)
    nodefile.write_text(f"{HOST}\n")
    cobalt = {"COBALT_JOBID": "10446", "COBALT_NODEFILE": str(nodefile), "COBALT_JOBSIZE": "1",
              "COBALT_PARTNAME": HOST, "JOBENV_RANKS_PER_HOST": "2"}
    reps = train(tmp_path, f"{tools(tmp_path / 'bin', mpi=False)}:/usr/bin:/bin", cobalt,
                 ["--profile", "thetagpu-here"], OMPI_ENV)
    assert all("OMPI_COMM_WORLD_RANK" in r["launcher_view"] for r in reps)


def test_pbs_shaped_polaris_job(tmp_path):
    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    jobid = "2024084.polaris-pbs-01" + machines.POLARIS_SUFFIX
    nodefile = tmp_path / "var/spool/pbs/aux" / jobid
    nodefile.parent.mkdir(parents=True)
    nodefile.write_text(f"{HOST}{machines.POLARIS_SUFFIX}\n" * 2)
    profile(tmp_path / "home", "polaris-here", "pbs",
            "[mpiexec, --launcher, fork, --envall, -n, '{nranks}', -ppn, '{ppn}', --hostfile, '{hostfile}']")
    env = {**machines.pbs_common(jobid, str(nodefile)), "JOBENV_RANKS_PER_HOST": "2"}
    train(tmp_path, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin", env, ["--profile", "polaris-here"])


def test_torchrun_untouched(tmp_path):
    bindir = tools(tmp_path / "bin", mpi=False)
    sysdir = tmp_path / "sys"  # no MPI anywhere on PATH: the local profile falls back to torchrun
    sysdir.mkdir()
    for tool in ("bash", "sh", "env", "date", "cat", "hostname", "uname", "timeout"):
        real = shutil.which(tool)
        if real:
            (sysdir / tool).symlink_to(real)
    reps = train(tmp_path, f"{bindir}:{sysdir}", {}, ["--ranks-per-host", "2"])
    assert all(r["launcher_view"] == {} for r in reps)
