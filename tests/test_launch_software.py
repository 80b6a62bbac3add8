"""The job's software environment: captured by save, re-activated for launch (jobenv.capture.software)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from conftest import mpich
from jobenv.capture import software
from jobenv.store.record import from_dict
from launchkit import fresh_env, save, shell, tools


def test_capture_prefers_activated_venv_then_conda_then_our_own(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(sys.executable)
    got = software.python_env({"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": "/opt/conda"})
    assert got == {"kind": "venv", "prefix": str(venv), "executable": str(venv / "bin" / "python3")}
    assert software.python_env({"CONDA_PREFIX": "/opt/conda/envs/t"})["kind"] == "conda"
    own = software.python_env({}, prefix="/srv/v", base_prefix="/usr", executable="/srv/v/bin/python")
    assert own == {"kind": "venv", "prefix": "/srv/v", "executable": "/srv/v/bin/python"}
    assert software.python_env({"PATH": ""}, prefix="/usr", base_prefix="/usr")["kind"] == "system"
    assert software.python_env({"VIRTUAL_ENV": "relative/venv"}, prefix="/usr", base_prefix="/usr")["kind"] == "system"


def test_capture_records_launcher_path_and_modules(tmp_path):
    (tmp_path / "mpiexec").write_text("#!/bin/sh\n")
    (tmp_path / "mpiexec").chmod(0o755)
    got = software.capture({"PATH": f"/nonexistent:{tmp_path}", "LOADEDMODULES": "PrgEnv-nvhpc/8.5:conda/2024"}, "mpiexec")
    assert got["launcher"] == str(tmp_path / "mpiexec") and got["modules"] == "PrgEnv-nvhpc/8.5:conda/2024"
    assert software.capture({"PATH": "/nonexistent"}, "srun")["launcher"] is None


def test_save_never_records_a_program_of_the_working_directory(tmp_path, monkeypatch):
    """Issue 24: with `.` or an empty entry in PATH, `jobenv save` recorded a `./srun` or
    `./python3` another user left in the working directory as the job's launcher and Python,
    which every later launch then ran by its absolute path."""
    for name in ("srun", "python3"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in (".", "", "::", "./"):
        got = software.capture({"PATH": path}, "srun")
        assert got["launcher"] is None, path
        assert software.python_env({"PATH": path}, prefix="/usr", base_prefix="/usr", executable="/usr/bin/py")[
            "executable"] == "/usr/bin/py", path


@pytest.mark.parametrize("bad", [
    "x", {"python": {"kind": "pip", "prefix": "/a", "executable": "/a/p"}},
    {"python": {"kind": "venv", "prefix": "rel", "executable": "/a/p"}}, {"launcher": "mpiexec"},
    {"launcher": ["/bin/sh"]}, {"modules": 3},
])
def test_malformed_field_is_dropped_not_fatal(bad):
    got = software.validate(bad)
    assert got is None or (got["python"] is None and got["launcher"] is None and got["modules"] is None)


def _rec(sw):
    return from_dict({"schema_version": 1, "scheduler": "local", "jobid": "h", "machine": "local", "hosts": ["h"],
                      "gpus_per_host": 0, "ranks_per_host": 1, "launch": ["mpiexec", "-n", "1"], "env": {},
                      "created_at": "t", "created_on": "h", "software": sw})


def test_record_round_trips_the_field(tmp_path):
    sw = {"python": {"kind": "venv", "prefix": str(tmp_path), "executable": str(tmp_path / "bin/python3")},
          "launcher": "/usr/bin/mpiexec", "modules": "a/1:b/2"}
    rec = _rec(sw)
    assert rec.software == sw and from_dict(json.loads(rec.to_json())).software == sw
    assert _rec({"python": 5}).software == {"python": None, "launcher": None, "modules": None}
    assert "software" not in from_dict({k: v for k, v in rec.to_dict().items() if k != "software"}).to_dict()


def test_restore_items(tmp_path):
    (tmp_path / "bin").mkdir()
    rec = _rec({"python": {"kind": "conda", "prefix": str(tmp_path), "executable": str(tmp_path / "bin/python3")},
                "launcher": None, "modules": "PrgEnv-gnu:cudatoolkit/12.2"})
    sets, path, warns = software.restore_items(rec, {"LOADEDMODULES": "PrgEnv-gnu"}, "x1")
    assert sets == {"CONDA_PREFIX": str(tmp_path)} and path == [str(tmp_path / "bin")]
    assert warns == ["loaded modules differ from the saved job's; to match it run: "
                     "module purge && module load PrgEnv-gnu cudatoolkit/12.2"]
    assert software.restore_items(rec, {"LOADEDMODULES": "PrgEnv-gnu:cudatoolkit/12.2"}, "x1", python=False) == ({}, [], [])
    gone = _rec({"python": {"kind": "venv", "prefix": "/nonexistent/v", "executable": "/nonexistent/v/bin/python"}})
    sets, path, warns = software.restore_items(gone, {}, "x2")
    assert (sets, path) == ({}, []) and "not here on x2" in warns[0]
    assert software.restore_items(_rec(None), {"LOADEDMODULES": "a"}, "h") == ({}, [], [])


def test_launcher_path():
    rec = _rec({"launcher": "/opt/mpich/bin/mpiexec"})
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
