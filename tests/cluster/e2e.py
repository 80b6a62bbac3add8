"""What the real-cluster test files share (tests/test_e2e_pbs.py, tests/test_e2e_flux.py,
tests/test_resilience_pbs.py, tests/test_resilience_flux.py): the cluster (one per session), the
per-test jobenv store, a "fresh shell" on a host (`env -i` inside the host's network and UTS
namespaces, as after `ssh HOST`), and a host's death (every process of a launch there killed)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

PYBIN = str(Path(sys.executable).parent)
PY = sys.executable
# a rank that says where it runs and which attempt it is, and kills itself on the host argv[1] names
KILLER = """import os, socket, sys
print(f"rank {os.environ['RANK']} on {socket.gethostname()} restart={os.environ.get('JOBENV_RESTART_COUNT')}", flush=True)
if socket.gethostname() == sys.argv[1]:
    os.kill(os.getpid(), 9)
"""


def cluster_fixture(make: Callable[[], object], available: Callable[[], Optional[str]], what: str):
    """A `cluster` fixture for a test module: `make()` started once per session (tests/conftest.py's
    ClusterPool, under the machine's cluster lock; skipping, in one line, where `available` says
    it cannot run here), shared by every module that makes one for the same `what`."""
    @pytest.fixture
    def cluster(cluster_pool):
        return cluster_pool.get(what, lambda _workdir: make(), available)

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


def host_procs(cluster, host: str, run_dir: str) -> List[int]:
    """Pids of the launch's processes on HOST: those in HOST's UTS namespace (the hosts share
    this machine's pid space) whose environment names the launch's run directory."""
    uts = os.readlink(f"/proc/{cluster.hosts.holders[host].pid}/ns/uts")
    want = f"JOBENV_RUN_DIR={run_dir}".encode()
    out = []
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or os.readlink(f"/proc/{name}/ns/uts") != uts:
                continue
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if want in env:
            out.append(int(name))
    return out


def kill_host(cluster, host: str, run_dir: str) -> List[int]:
    """Every process of the launch on HOST stopped, then killed (what a dead host leaves: nothing
    there sees the others die); the pids."""
    procs = host_procs(cluster, host, run_dir)
    for pid in procs:
        os.kill(pid, signal.SIGSTOP)
    for pid in procs:
        os.kill(pid, signal.SIGKILL)
    return procs


def ledger(store: str, host: str, nstarts: int, timeout: float = 90) -> Path:
    """HOST's ledger of the launch once NSTARTS ranks started there and its agent beats."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in Path(store).glob(f"runs/*/*/host-{host}.ledger"):
            if path.read_text().count("start ") >= nstarts and (path.parent / f"host-{host}.beat").exists():
                return path
        time.sleep(0.2)
    raise AssertionError(f"no ledger of {nstarts} ranks from {host}")


def failed_over(err: str, logs: Path, first: str, second: str, spare: str) -> None:
    """A 3-host job's 4-rank launch with `--spare-nodes 1 --retries 1 --log-dir LOGS` whose
    ranks on SECOND killed themselves (KILLER): SECOND named and retired, SPARE in its place,
    attempt 1's logs set aside intact and attempt 2's ranks on FIRST and SPARE (the PBS and
    Flux failover tests' one reading of it; Slurm's, in tests/test_launch_slurm.py, has 6 ranks)."""
    import re

    assert re.search(rf"jobenv: (rank [23] on {second} failed first|ranks 2-3 on {second} failed the same way): "
                     r"signal 9 \(SIGKILL\)", err), err
    retired = re.search(rf"jobenv: retired {second} \(signal 9 \(SIGKILL\) of rank ([23]), named; ledger "
                        rf"\S+/bad-hosts.json\): {spare} takes its place\njobenv: retrying \(2 of 2\)", err)
    assert retired, err
    attempt1 = {f.name: f.read_text() for f in (logs / "attempt-1").iterdir()}
    assert sorted(attempt1) == [f"rank-{r}.log" for r in range(4)], attempt1
    # attempt 1's logs set aside intact; a rank the launcher ended before it printed has an empty one
    assert attempt1[f"rank-{retired.group(1)}.log"] == f"rank {retired.group(1)} on {second} restart=0\n", attempt1
    assert all(attempt1[f"rank-{r}.log"] in ("", f"rank {r} on {h} restart=0\n")
               for r, h in enumerate([first, first, second, second])), attempt1
    again = sorted((logs / f"rank-{r}.log").read_text() for r in range(4))
    assert again == sorted(f"rank {r} on {h} restart=1\n" for r, h in enumerate([first, first, spare, spare])), again
