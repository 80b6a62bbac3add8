"""The ranks' interpreter's MPI builds (jobenv.launch.plan.mpibuilds), remembered between launches
while the interpreter and its package directories are unchanged."""
from __future__ import annotations

import os
import time
from pathlib import Path

from jobenv.launch.plan.mpibuilds import current_builds, package_dirs
from jobenv.store.cache import RACY


def _interpreter(tmp_path: Path) -> Path:
    """A prefix whose bin/python answers the probe as an MPICH mpi4py would, counting its runs."""
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    py = prefix / "bin" / "python"
    py.write_text(f"#!/bin/sh\necho run >> {tmp_path}/runs\necho '{{\"mpi4py\": \"MPICH Version: 4.2\"}}'\n")
    py.chmod(0o755)
    time.sleep(RACY + 0.1)  # settled: a change within the same clock tick would go unseen
    return py


def test_the_probe_is_remembered_until_a_package_directory_changes(tmp_path):
    py = _interpreter(tmp_path)
    env = {"JOBENV_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    os.makedirs(env["JOBENV_HOME"])
    assert package_dirs(str(py), env) == [str(tmp_path / "venv" / "lib" / "python3.11" / "site-packages")]
    runs = tmp_path / "runs"
    assert current_builds(str(py), env) == {"mpi4py": "MPICH"}
    assert current_builds(str(py), env) == {"mpi4py": "MPICH"}
    assert runs.read_text().count("run") == 1  # the second launch read the cache
    (Path(package_dirs(str(py), env)[0]) / "horovod").mkdir()  # pip installs a package
    assert current_builds(str(py), env) == {"mpi4py": "MPICH"}
    assert runs.read_text().count("run") == 2
    assert current_builds(str(py), {**env, "PYTHONPATH": str(tmp_path)}) == {"mpi4py": "MPICH"}
    assert runs.read_text().count("run") == 3  # another PYTHONPATH: asked again
