"""Shared helpers: run the real `jobenv` command in a controlled environment."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def base_env(home: Path, extra: Optional[Mapping[str, str]] = None, path: Optional[str] = None) -> Dict[str, str]:
    """A minimal environment, as in a fresh login shell, plus `extra`."""
    env = {"HOME": str(home), "PATH": path or BASE_PATH, "JOBENV_HOME": str(home / ".jobenv"),
           "LANG": "C.UTF-8", "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / ".config")}
    env.update(extra or {})
    return env


def jobenv(args: List[str], env: Mapping[str, str], check: bool = False, **kw) -> subprocess.CompletedProcess:
    """Run `python -m jobenv ARGS` as a user would run `jobenv ARGS`."""
    p = subprocess.run([sys.executable, "-m", "jobenv", *args], env=dict(env), capture_output=True,
                       text=True, errors="surrogateescape", timeout=120, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"jobenv {args} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def record(env: Mapping[str, str], job: Optional[str] = None) -> dict:
    args = ["show", "--json"] + (["--job", job] if job else [])
    return json.loads(jobenv(args, env, check=True).stdout)


def store_files(env: Mapping[str, str]) -> Dict[str, bytes]:
    d = Path(env["JOBENV_HOME"]) / "jobs"
    if not d.exists():
        return {}
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.endswith(".lock")}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CI"):
            raise AssertionError(f"{program} is required in CI (.ci/run installs it)")
        pytest.skip(f"{program} is not installed")
    return path


def mpich() -> str:
    """The MPICH wheel's mpiexec, installed next to this interpreter (not another MPI's on PATH)."""
    exe = Path(sys.executable).parent / "mpiexec"
    if not exe.exists():
        if os.environ.get("CI"):
            raise AssertionError("the mpich wheel's mpiexec is required in CI")
        pytest.skip("mpich wheel not installed")
    return str(exe)


_E2E_TIMES = []


def pytest_runtest_logreport(report):
    if report.when == "call" and "e2e" in report.keywords:
        _E2E_TIMES.append((report.nodeid, report.duration, report.outcome))


def pytest_terminal_summary(terminalreporter):
    """One timing line per end-to-end scenario (the CI budget is watched through these)."""
    if _E2E_TIMES:
        terminalreporter.section("scenario timings")
        for nodeid, secs, outcome in _E2E_TIMES:
            terminalreporter.write_line(f"{secs:7.1f} s  {outcome:7}  {nodeid}")
