"""The launcher a launch runs (jobenv.launch.software): the recorded one while it is here; and
the saved software environment winning over a fresh shell's PATH, end to end."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from conftest import mpich
from jobenv.launch import software
from launchkit import fresh_env, save, shell, tools
from test_store_software import record_with


def test_launcher_path():
    rec = record_with({"launcher": "/opt/mpich/bin/mpiexec"})
    assert software.launcher_path(rec, "mpiexec", exists=lambda p: True) == ("/opt/mpich/bin/mpiexec", None)
    prog, warn = software.launcher_path(rec, "mpiexec", exists=lambda p: False)
    assert prog == "mpiexec" and "not here" in warn
    assert software.launcher_path(rec, "srun", exists=lambda p: True) == ("srun", None)


def venv_and_tools(tmp_path: Path) -> Tuple[Path, Path]:
    """A fresh venv and a tool directory whose mpiexec is the MPICH wheel's."""
    mpich()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv, tools(tmp_path / "mpi")


@pytest.mark.e2e
def test_saved_venv_and_launcher_win_over_a_fresh_shells_path(tmp_path):
    """Save with a venv active; restore in `env -i` with another python3 and mpiexec first."""
    venv, mpi = venv_and_tools(tmp_path)
    (mpi / "python3").unlink()  # the venv's python3 must come from the venv
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{venv}/bin:{mpi}:/usr/bin:/bin", VIRTUAL_ENV=str(venv))
    save(env, "--ranks-per-host", "2")
    p = shell(env, "jobenv launch -n 1 -- sh -c 'echo $PATH'")  # the venv was on PATH already: once
    assert p.stdout.split("\n")[0] == f"{home}/.jobenv/bin:{venv}/bin:{mpi}:/usr/bin:/bin", p.stdout + p.stderr
    other = tmp_path / "other"
    other.mkdir()
    for prog in ("python3", "mpiexec"):
        (other / prog).write_text("#!/bin/sh\necho WRONG-$0\nexit 9\n")
        (other / prog).chmod(0o755)
    fresh = fresh_env(home, f"{other}:{tools(tmp_path / 'jb', mpi=False)}:/usr/bin:/bin")
    p = shell(fresh, "jobenv launch -- python3 -c 'import os, sys; print(sys.executable, os.environ[\"VIRTUAL_ENV\"])'")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split("\n")[:2] == [f"{venv}/bin/python3 {venv}"] * 2, p.stdout
    p = shell(fresh, "source <(jobenv get) && command -v python3 && echo $VIRTUAL_ENV && launch python3 -c "
                     "'import sys; print(sys.executable)'")
    assert p.stdout.split("\n")[:4] == [f"{venv}/bin/python3", str(venv)] + [f"{venv}/bin/python3"] * 2, p.stdout
    p = shell(fresh, "source <(jobenv get --no-python) && command -v python3; echo VENV=${VIRTUAL_ENV-}")
    assert p.stdout.split("\n")[:2] == [f"{other}/python3", "VENV="], p.stdout  # get --no-python leaves it out
    p = shell(fresh, "jobenv launch --no-python --dry-run -- true")
    assert p.stdout.startswith(f"{mpi}/mpiexec "), p.stdout  # the recorded launcher, by absolute path
    p = shell(fresh, "jobenv launch --no-python -- python3 -c pass")
    assert "WRONG" in p.stdout and p.returncode != 0  # without the venv, PATH's python3 runs
    assert Path(home / ".jobenv" / "bin" / "launch").read_text().startswith("#!/bin/sh\n")


@pytest.mark.e2e
def test_launch_runs_the_staged_copy(tmp_path):
    """After `jobenv stage`, `jobenv launch` itself sends every rank to its host's copy."""
    venv, mpi = venv_and_tools(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{mpi}:/usr/bin:/bin")
    target = tmp_path / "node-local"
    p = shell(env, f"jobenv save --quiet --ranks-per-host 2 && jobenv stage --env {venv} --to {target}")
    assert p.returncode == 0, p.stdout + p.stderr
    p = shell(env, "jobenv launch -- python3 -c 'import sys; print(sys.executable)'")
    assert p.returncode == 0, p.stdout + p.stderr
    exes = p.stdout.split()
    assert len(exes) == 2 and all(e.startswith(f"{target}/") for e in exes), p.stdout
