"""The teardown soak on the real Slurm cluster (tests/cluster): `jobenv launch` under srun, one
rank on each of 2 nodes, a DDP model outliving destroy_process_group.  Run it under
`flock /tmp/jobenv-slurm.lock`; JOBENV_SOAK_RUNS runs (10 in CI)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from launchkit import RESTORE, need_torch
from test_e2e_slurm import PYBIN, batch_job, cluster, jobs, store  # noqa: F401 (fixtures)
from test_rankhook import DDP, SOAK_RUNS
from conftest import REPO

pytestmark = pytest.mark.e2e


def test_teardown_soak_under_srun(cluster, jobs, store, tmp_path):  # noqa: F811
    need_torch()
    # the job outlives the loop (a run takes ~3 s): 600 s held only ~165 runs
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "1", hold=120 + 10 * SOAK_RUNS)
    prog = tmp_path / "ddp.py"
    prog.write_text(DDP)
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:/usr/bin:/bin", "JOBENV_HOME": store,
           "PYTHONPATH": str(REPO), "GLOO_SOCKET_IFNAME": "eth0"}
    loop = (f"{RESTORE} && for i in $(seq {SOAK_RUNS}); do jobenv launch -- python3 {prog} > {tmp_path}/out.$i 2>&1 "
            f"|| echo FAILED $i $?; done; echo LOOP-DONE")
    argv = cluster.on_node("node1", ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/usr/bin/bash",
                                     "--norc", "--noprofile", "-c", loop])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60 + 60 * SOAK_RUNS)
    assert "LOOP-DONE" in p.stdout, p.stdout + p.stderr
    failed = re.findall(r"FAILED (\d+) (\d+)", p.stdout)
    detail = [(tmp_path / f"out.{i}").read_text()[-800:] for i, _ in failed[:2]]
    assert not failed, f"{len(failed)} of {SOAK_RUNS} runs failed: {failed} {detail}"
    ledgers = {f: f.read_text() for f in Path(store).glob("runs/*/*/host-*.ledger")}
    unclean = {str(f): text for f, text in ledgers.items() if text.count("clean ") != 1}
    assert len(ledgers) == 2 * SOAK_RUNS and not unclean, unclean  # every rank's hook armed and saw its main finish
    warned = sum("interpreter teardown" in (tmp_path / f"out.{i}").read_text() for i in range(1, SOAK_RUNS + 1))
    print(f"\n{SOAK_RUNS} runs under srun, 0 failed, {warned} with a teardown warning")
