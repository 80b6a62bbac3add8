"""What the real-cluster test files share (tests/test_e2e_pbs.py, tests/test_e2e_flux.py):
the module-scoped cluster, the per-test jobenv store, and a "fresh shell" on a host (`env -i`
inside the host's network and UTS namespaces, as after `ssh HOST`)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

PYBIN = str(Path(sys.executable).parent)
PY = sys.executable


def cluster_fixture(make: Callable[[], object], available: Callable[[], Optional[str]], what: str):
    """A module-scoped fixture that starts `make()` (skipping, in one line, where `available`
    says it cannot run here) and stops it after the module's last test."""
    @pytest.fixture(scope="module")
    def cluster():
        why = available()
        if why:
            pytest.skip(why)
        c = make().start()  # type: ignore[attr-defined]
        print(f"\n{what} up in {c.startup_seconds:.2f} s")
        yield c
        c.stop()

    return cluster


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "jobenv-home")


def run_fresh(cluster, host: str, env: Dict[str, str], script: str, timeout: float = 240):
    """SCRIPT in a fresh bash on HOST with nothing but `env`."""
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "--noprofile", "-c", script]
    return cluster.hosts.run(host, argv, check=False, timeout=timeout)


def left_running(pattern: str, but: str = "", wait: float = 5.0) -> List[str]:
    """The processes whose command line holds `pattern` (`pgrep -af`, less pgrep and lines
    holding `but`), after waiting up to `wait` s for them to end: a host agent is a fork of a
    rank's keeper (its command line) and ends within two beats of its host's last rank."""
    def now() -> List[str]:
        out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
        return [ln for ln in out.splitlines() if "pgrep" not in ln and not (but and but in ln)]
    deadline = time.time() + wait
    while now() and time.time() < deadline:
        time.sleep(0.3)
    return now()
