"""Scenarios 7 and 8 on this host: PBS (Polaris) and Cobalt (ThetaGPU) shaped jobs whose
launcher is MPICH's mpiexec with the fork launcher, and the local default with and without
an MPI.  save -> get in a fresh shell -> `launch python3 -m jobenv.selftest`."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import machines
from conftest import REPO

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
HOST = socket.gethostname()


def tools(tmp_path: Path, with_mpi: bool) -> Path:
    """A PATH directory with python3, jobenv, torchrun and (optionally) MPICH's mpiexec."""
    d = tmp_path / ("bin-mpi" if with_mpi else "bin-nompi")
    d.mkdir()
    wrappers = {"python3": f'exec {sys.executable} "$@"', "jobenv": f'exec {sys.executable} -m jobenv "$@"',
                "torchrun": f'exec {sys.executable} {BIN / "torchrun"} "$@"'}
    if with_mpi:
        wrappers["mpiexec"] = f'exec {BIN / "mpiexec"} "$@"'
    for name, body in wrappers.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    return d


def need_stack(mpi: bool = True):
    import importlib.util

    missing = [m for m in ("torch",) if importlib.util.find_spec(m) is None]
    if mpi and not (BIN / "mpiexec").exists():
        missing.append("mpich wheel")
    if missing:
        if os.environ.get("CI"):
            raise AssertionError(f"required in CI: {missing}")
        pytest.skip(f"not installed: {missing}")


def no_mpi_path(tmp_path: Path, bindir: Path) -> str:
    """PATH with our tools and only basic system commands: no MPI anywhere (Debian's Open MPI
    lives in /usr/bin, so /usr/bin itself cannot be on it)."""
    sysdir = tmp_path / "sys"
    sysdir.mkdir()
    for tool in ("bash", "sh", "env", "date", "cat", "hostname", "uname"):
        (sysdir / tool).symlink_to(f"/usr/bin/{tool}" if Path(f"/usr/bin/{tool}").exists() else f"/bin/{tool}")
    return f"{bindir}:{sysdir}"


def flow(tmp_path: Path, save_env: dict, save_args: list, bindir: Path, path: str = "") -> dict:
    """Save in the job's first shell, then get + launch the selftest from an empty environment."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {"HOME": str(home), "PATH": path or f"{bindir}:/usr/bin:/bin", "JOBENV_HOME": str(home / ".jobenv"),
            "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / ".config")}
    p = subprocess.run([str(bindir / "jobenv"), "save", "--quiet", *save_args], env={**base, **save_env},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    report = tmp_path / "report.json"
    fresh = {**base, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    p = subprocess.run(["/usr/bin/env", "-i", *[f"{k}={v}" for k, v in fresh.items()], "bash", "--norc", "--noprofile", "-c",
                        f"source <(jobenv get) && launch python3 -m jobenv.selftest --timeout 120 --json-file {report}"],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(report.read_text())


def fork_profile(home: Path, name: str, scheduler: str) -> None:
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(
        f"name: {name}\nscheduler: {scheduler}\ndescription: this host, MPICH Hydra without ssh\n"
        "launchers:\n  - argv: [mpiexec, --launcher, fork, -n, '{nranks}', -ppn, '{ppn}', --hostfile, '{hostfile}']\n")


def test_polaris_shaped_pbs_job(tmp_path):
    need_stack()
    jobid = "2024084.polaris-pbs-01" + machines.POLARIS_SUFFIX
    nodefile = tmp_path / "var/spool/pbs/aux" / jobid
    nodefile.parent.mkdir(parents=True)
    nodefile.write_text(f"{HOST}{machines.POLARIS_SUFFIX}\n" * 4)  # one line per MPI slot, FQDN
    fork_profile(tmp_path / "home", "polaris-here", "pbs")
    env = machines.pbs_common(jobid, str(nodefile))
    rep = flow(tmp_path, env, ["--profile", "polaris-here"], tools(tmp_path, True))
    assert rep["ok"] and rep["world_size"] == 4 and rep["launcher"] == "mpich"
    assert list(rep["ranks_per_host"].values()) == [[0, 1, 2, 3]]


def test_thetagpu_shaped_cobalt_job(tmp_path):
    need_stack()
    nodefile = tmp_path / "var/tmp/cobalt.10446"
    nodefile.parent.mkdir(parents=True)
    nodefile.write_text(f"{HOST}\n")
    fork_profile(tmp_path / "home", "thetagpu-here", "cobalt")
    env = {"COBALT_JOBID": "10446", "COBALT_NODEFILE": str(nodefile), "COBALT_JOBSIZE": "1",
           "COBALT_PARTNAME": HOST, "JOBENV_RANKS_PER_HOST": "2"}
    rep = flow(tmp_path, env, ["--profile", "thetagpu-here"], tools(tmp_path, True))
    assert rep["ok"] and rep["world_size"] == 2


def test_local_default_with_mpich(tmp_path):
    need_stack()
    rep = flow(tmp_path, {}, ["--ranks-per-host", "3"], tools(tmp_path, True))
    assert rep["ok"] and rep["world_size"] == 3 and rep["launcher"] == "mpich"


def test_local_default_without_mpi_uses_torchrun(tmp_path):
    need_stack(mpi=False)
    bindir = tools(tmp_path, False)
    rep = flow(tmp_path, {}, ["--ranks-per-host", "2"], bindir, no_mpi_path(tmp_path, bindir))
    assert rep["ok"] and rep["world_size"] == 2 and rep["launcher"] == "torchrun"
