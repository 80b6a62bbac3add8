"""The job's software environment, captured by save (jobenv.capture.software_env)."""
from __future__ import annotations

import sys

from jobenv.capture import software_env


def test_capture_prefers_activated_venv_then_conda_then_our_own(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(sys.executable)
    got = software_env.python_env({"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": "/opt/conda"})
    assert got == {"kind": "venv", "prefix": str(venv), "executable": str(venv / "bin" / "python3")}
    assert software_env.python_env({"CONDA_PREFIX": "/opt/conda/envs/t"})["kind"] == "conda"
    own = software_env.python_env({}, prefix="/srv/v", base_prefix="/usr", executable="/srv/v/bin/python")
    assert own == {"kind": "venv", "prefix": "/srv/v", "executable": "/srv/v/bin/python"}
    assert software_env.python_env({"PATH": ""}, prefix="/usr", base_prefix="/usr")["kind"] == "system"
    assert software_env.python_env({"VIRTUAL_ENV": "relative/venv"}, prefix="/usr", base_prefix="/usr")["kind"] == "system"


def test_capture_records_launcher_path_and_modules(tmp_path):
    (tmp_path / "mpiexec").write_text("#!/bin/sh\n")
    (tmp_path / "mpiexec").chmod(0o755)
    got = software_env.capture({"PATH": f"/nonexistent:{tmp_path}", "LOADEDMODULES": "PrgEnv-nvhpc/8.5:conda/2024"}, "mpiexec")
    assert got["launcher"] == str(tmp_path / "mpiexec") and got["modules"] == "PrgEnv-nvhpc/8.5:conda/2024"
    assert software_env.capture({"PATH": "/nonexistent"}, "srun")["launcher"] is None


def test_save_never_records_a_program_of_the_working_directory(tmp_path, monkeypatch):
    """Issue 24: with `.` or an empty entry in PATH, `jobenv save` recorded a `./srun` or
    `./python3` another user left in the working directory as the job's launcher and Python,
    which every later launch then ran by its absolute path."""
    for name in ("srun", "python3"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in (".", "", "::", "./"):
        got = software_env.capture({"PATH": path}, "srun")
        assert got["launcher"] is None, path
        assert software_env.python_env({"PATH": path}, prefix="/usr", base_prefix="/usr", executable="/usr/bin/py")[
            "executable"] == "/usr/bin/py", path
