"""Failures named as they happen on the real 4-node Slurm cluster (tests/cluster): a rank
killed with SIGKILL on node2, and every process of the launch on node2 killed (what a dead
node leaves), each named with its host within seconds, the launch ended though srun (no
--kill-on-bad-exit) would leave the other ranks running.

Run under `flock /tmp/jobenv-slurm.lock`: one cluster at a time on a machine.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cluster.e2e import ledger as e2e_ledger
from launchkit import RESTORE
from test_launch_slurm import no_step_left
from test_e2e_slurm import PYBIN, batch_job, cluster, jobs, store  # noqa: F401 (fixtures)
from conftest import REPO

pytestmark = pytest.mark.e2e


@pytest.fixture
def job4(cluster, jobs, store, tmp_path):  # noqa: F811
    return batch_job(cluster, jobs, store, tmp_path, "-N", "4", "--ntasks-per-node", "2")


def _launch(cluster, store, script: str) -> subprocess.Popen:  # noqa: F811
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:/usr/bin:/bin", "JOBENV_HOME": store,
           "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    argv = cluster.on_node("node1", ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/usr/bin/bash",
                                     "--norc", "--noprofile", "-c", f"{RESTORE} && {script}"])
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _node_procs(node: str, run_dir: str) -> list:
    """Pids of the launch's processes on `node` (the cluster's nodes share one pid space)."""
    want = [f"SLURMD_NODENAME={node}".encode(), f"JOBENV_RUN_DIR={run_dir}".encode()]
    out = []
    for name in os.listdir("/proc"):
        try:
            env = b"\0" + Path(f"/proc/{name}/environ").read_bytes() + b"\0"
        except OSError:
            continue
        if name.isdigit() and all(b"\0" + w + b"\0" in env for w in want):
            out.append(int(name))
    return out


def verdict(cluster, store: str) -> tuple:  # noqa: F811
    """(outcome, cause, exit, the first failure's rank/host/how/exit/signal) of the last run, as
    `jobenv runs show --json` gives them on node1."""
    import json

    p = _launch(cluster, store, "jobenv runs show --json last")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    shown = json.loads(out)
    first = shown["first_failure"]
    return (shown["outcome"], shown["cause"], shown["exit"],
            first and {k: first[k] for k in ("rank", "host", "how", "exit", "signal")})


def test_a_rank_killed_with_sigkill_on_node2_is_named_with_its_host(cluster, store, job4):  # noqa: F811
    p = _launch(cluster, store, "timeout -s KILL 120 jobenv launch -- sh -c "
                                "'if [ $RANK = 3 ]; then sleep 3; kill -9 $$; fi; sleep 300'")
    t = time.monotonic()
    out, err = p.communicate(timeout=200)
    ended = time.time()
    assert time.monotonic() - t < 40, err  # rank 3 died ~3 s after its start; srun alone waits 300 s
    (ledger,) = Path(store).glob("runs/*/*/host-node2.ledger")
    died = next(float(line.split()[-1]) for line in ledger.read_text().splitlines() if line.startswith("end 3 "))
    print(f"\nrank 3 died -> launch ended in {ended - died:.1f} s")
    host = re.search(r"jobenv: rank 3 on (\S+) failed: signal 9 \(SIGKILL\)\n", err)
    assert host and host.group(1) == "node2", err
    assert "jobenv: rank 3 on node2 failed first: signal 9 (SIGKILL) (1 of 8 ranks failed; 7 were stopped after it)" \
        in err, err  # srun's teardown of the rest is not 7 more failures
    print(f"\n{err}")
    assert p.returncode == 137, err  # rank 3's own 128+9, as torchrun reports its root cause
    assert verdict(cluster, store) == ("failed", "rank", 137, {"rank": 3, "host": "node2", "how": "signal",
                                                               "exit": None, "signal": 9}), err
    no_step_left(cluster)


def test_every_process_of_node2_killed_names_the_host(cluster, store, job4):  # noqa: F811
    t0 = time.monotonic()
    p = _launch(cluster, store, "timeout -s KILL 150 jobenv launch -- sh -c 'sleep 300'")
    try:
        ledger = e2e_ledger(store, "node2", 2, timeout=60)
        time.sleep(1.5)
        procs = _node_procs("node2", str(ledger.parent))
        assert len(procs) >= 5, procs  # 2 wrappers, 2 programs (sh, sleep), the agent
        for pid in procs:  # stopped first, so nothing there sees the others die
            os.kill(pid, signal.SIGSTOP)
        killed = time.monotonic()
        for pid in procs:
            os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=200)
    finally:
        p.kill()
    took = time.monotonic() - killed
    assert re.search(r"jobenv: host node2 lost: ranks 2,3 stopped reporting at \d\d:\d\d:\d\d\n", err), err
    assert re.search(r"jobenv: host node2 lost: ranks 2,3 stopped reporting at \S+ first "
                     r"\(2 of 8 ranks failed; 6 were stopped after it\)", err), err
    assert p.returncode != 0 and took < 40, (p.returncode, took, err)
    outcome, cause, code, first = verdict(cluster, store)  # no code of its own: srun's
    assert (outcome, cause, code, first["host"], first["how"], first["exit"], first["signal"]) == \
        ("failed", "rank", p.returncode, "node2", "vanished", None, None), (code, first, err)
    print(f"\nnode2 killed -> launch ended in {took:.1f} s (of {time.monotonic() - t0:.1f} s)\n{err}")
    no_step_left(cluster)
