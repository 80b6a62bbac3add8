"""Shared helpers: run the real `jobenv` command in a controlled environment."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def base_env(home: Path, extra: Optional[Mapping[str, str]] = None, path: Optional[str] = None) -> Dict[str, str]:
    """A minimal environment, as in a fresh login shell, plus `extra`."""
    env = {"HOME": str(home), "PATH": path or BASE_PATH, "JOBENV_HOME": str(home / ".jobenv"),
           "LANG": "C.UTF-8", "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / ".config")}
    env.update(extra or {})
    return env


def jobenv_program(tmp_path: Path) -> Path:
    """A `jobenv` program for this checkout whose argv[0] is its own absolute path, as a
    venv's console script is (`init --install` pins it), wherever this interpreter's lives."""
    exe = tmp_path / "venv-bin" / "jobenv"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path[:0] = [{str(REPO)!r}]\n"
                   "from jobenv.__main__ import main\nsys.exit(main())\n")
    exe.chmod(0o755)
    return exe


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


class OtherUser:
    """A second local user: the attacker on a shared node (another account, same /tmp)."""

    def __init__(self, name: str, uid: int, gid: int) -> None:
        self.name, self.uid, self.gid = name, uid, gid

    def sh(self, script: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """Run a POSIX sh script as this user (no groups, a minimal environment)."""
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--",
                "/bin/sh", "-c", script]
        env = {"PATH": BASE_PATH, "HOME": "/nonexistent", "LANG": "C.UTF-8"}
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"as {self.name}: {script!r} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p


@pytest.fixture(scope="session")
def other_user() -> OtherUser:
    """A real second account (created once, as root: CI runs as root) to plant files as."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        if os.environ.get("CI"):
            raise AssertionError("CI runs as root with setpriv: the second-user tests must run")
        pytest.skip("needs root (to create a second local user) and setpriv")
    name = "jobenvmallory"
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True,
                       capture_output=True)
    import pwd
    pw = pwd.getpwnam(name)
    return OtherUser(name, pw.pw_uid, pw.pw_gid)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh world-writable sticky directory shaped like /tmp, reachable by every user
    (pytest's own tmp_path sits under a private 0700 directory)."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="jobenv-shared-", dir="/tmp"))
    d.chmod(0o1777)
    yield d
    subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False)
