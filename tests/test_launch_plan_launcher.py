"""The launcher a launch runs (jobenv.launch.plan.launcher): the recorded one while it is here; and
the saved software environment winning over a fresh shell's PATH, end to end."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from conftest import mpich
from jobenv.launch.plan import launcher
from launchkit import fresh_env, save, shell, tools
from test_store_software_field import record_with


def test_launcher_path():
    rec = record_with({"launcher": "/opt/mpich/bin/mpiexec"})
    assert launcher.launcher_path(rec, "mpiexec", exists=lambda p: True) == ("/opt/mpich/bin/mpiexec", None)
    prog, warn = launcher.launcher_path(rec, "mpiexec", exists=lambda p: False)
    assert prog == "mpiexec" and "not here" in warn
    assert launcher.launcher_path(rec, "srun", exists=lambda p: True) == ("srun", None)


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


def test_an_older_record_s_family_is_derived_once_from_its_launcher(tmp_path):
    """A version-2 record names no family: derived once (as launches did) and kept on it."""
    from jobenv.core.errors import BadInput
    from jobenv.store.record import from_dict

    pals = tmp_path / "opt/cray/pals/1.8/bin"
    pals.mkdir(parents=True)
    (pals / "mpiexec").write_text("#!/bin/sh\n")
    (pals / "mpiexec").chmod(0o755)
    old = {"schema_version": 2, "scheduler": "pbs", "jobid": "1", "machine": "pbs", "hosts": ["a"],
           "gpus_per_host": 0, "ranks_per_host": 1, "launch": ["mpiexec", "-n", "1"], "env": {},
           "created_at": 1.0, "created_on": "a", "launcher_family": "srun"}
    rec = from_dict(old)
    assert rec.launcher_family is None  # not a version-2 record's to say
    assert launcher.launcher_family(rec, {"PATH": f"{pals}:/usr/bin"}) == "pals" == rec.launcher_family
    assert launcher.launcher_family(rec, {"PATH": "/usr/bin"}) == "pals"  # once: not found again
    rec = from_dict({**old, "schema_version": 3, "launcher_family": ""})
    with pytest.raises(BadInput, match="not one jobenv knows"):
        launcher.launcher_family(rec, {})
    rec = from_dict({**old, "schema_version": 3, "launcher_family": "hydra"})
    with pytest.raises(BadInput, match="does not know"):
        launcher.launcher_family(rec, {})


@pytest.mark.e2e
def test_a_version_2_record_still_restores_and_launches(tmp_path):
    """A record saved before the launch decision was recorded: `get` restores it, and
    `launch` runs it whole and sized (its template found in its profile, as before)."""
    import json

    from launchkit import local_job

    env = local_job(tmp_path, 2)
    [path] = (tmp_path / "home" / ".jobenv" / "jobs").glob("local-*.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and data["launcher_family"] == "mpich"
    assert data["launch_template"]["argv"][0] == "mpiexec"
    for key in ("launch_template", "launcher_family"):
        del data[key]
    path.write_text(json.dumps({**data, "schema_version": 2}))
    prog = "python3 -c 'import os; print(\"RANK\", os.environ[\"RANK\"], os.environ[\"WORLD_SIZE\"])'"
    p = shell(env, f"source <(jobenv get) && echo NRANKS=$NRANKS && launch {prog} && jobenv launch -n 1 -- {prog}")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert "NRANKS=2" in lines and sorted(ln for ln in lines if ln.startswith("RANK")) == [
        "RANK 0 1", "RANK 0 2", "RANK 1 2"], p.stdout
    assert json.loads(path.read_text())["schema_version"] == 2  # a launch rewrites no record


def test_given_launcher_and_retarget(tmp_path):
    from jobenv.core.errors import BadInput
    from jobenv.launch.plan.launcher import given_launcher, retarget
    from jobenv.runtime import families

    mpich()
    binp = os.path.dirname(sys.executable)
    which = lambda name: shutil.which(name, path=f"{binp}:/usr/bin:/bin")  # noqa: E731
    assert given_launcher(os.path.join(binp, "mpiexec"), which) == (os.path.join(binp, "mpiexec"), "mpich")
    assert given_launcher("mpich", which) == (os.path.join(binp, "mpiexec.hydra"), "mpich")
    if os.path.exists("/usr/bin/mpiexec.openmpi"):
        path, fam = given_launcher("openmpi", which)
        assert fam == "openmpi" and path.startswith("/usr/bin/"), path
    for bad in ("nosuchlauncher", str(tmp_path / "nope"), "pals"):
        with pytest.raises(BadInput, match="--launcher"):
            given_launcher(bad, which)
    row = families.get("openmpi")
    assert retarget("/usr/bin/mpirun", row, 2, 2, 1, "/h") == ["/usr/bin/mpirun", "-n", "2", "--oversubscribe"]
    assert retarget("m", families.get("mpich"), 8, 4, 2, "/h") == ["m", "-n", "8", "-ppn", "4", "--hostfile", "/h"]
    with pytest.raises(BadInput, match="not an mpiexec"):
        retarget("srun", families.get("srun"), 2, 2, 1, "/h")
