"""What the real-cluster test files share (tests/test_e2e_pbs.py, tests/test_e2e_flux.py):
the module-scoped cluster, the per-test jobenv store, and a "fresh shell" on a host (`env -i`
inside the host's network and UTS namespaces, as after `ssh HOST`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, Optional

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
