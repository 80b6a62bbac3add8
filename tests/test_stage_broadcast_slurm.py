"""`jobenv stage` as a broadcast on four nodes of the real Slurm test cluster (run under
`flock /tmp/jobenv-cluster.lock`): node1 reads the archive, the others get it from a peer;
a re-stage reads nothing; a host that fails is named and, with --min-fraction, the launch
goes on without it (bad-host ledger)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from launchkit import RESTORE
from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401 (the Slurm test bed's fixtures)
from test_stage import make_venv
from jobenv.cli.stage import copy_name

pytestmark = pytest.mark.e2e


def shared_read(stdout: str) -> float:
    m = re.search(r"shared file system read: [0-9.,]+ MB, ([0-9.]+)x the archive", stdout)
    assert m, stdout
    return float(m.group(1))


def test_broadcast_reads_once_tolerates_a_failed_host(tmp_path, cluster, jobs, store):  # noqa: F811
    batch_job(cluster, jobs, store, tmp_path, "-N", "4", "--ntasks-per-node", "1")
    venv = make_venv(tmp_path / "shared" / "env")
    (venv / "blob.bin").write_bytes(os.urandom(8 << 20))  # a few MB: the relay streams in 1 MiB chunks
    to = tmp_path / "local"
    stage = f"jobenv stage --env {venv} --to {to}/%h --fan-out 2 --peer-timeout 20"
    p = fresh(cluster, "node1", "bash", stage, store)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4/4 hosts verified (4 copied, 0 unchanged)" in p.stdout
    assert shared_read(p.stdout) == 1.0 and "(3 host(s) received it from a peer)" in p.stdout, p.stdout
    assert p.stdout.count("verified, received from a peer") == 3, p.stdout  # each host's line says how
    assert p.stdout.count("verified, read from the shared file system") == 1, p.stdout
    name = copy_name(str(venv))
    for h in cluster.nodes:
        assert (to / h / name / "blob.bin").read_bytes() == (venv / "blob.bin").read_bytes()
        assert not [n for n in os.listdir(to / h) if ".spool." in n]  # spools removed
    assert not [n for n in os.listdir(Path(store) / "stage") if n.startswith("relay.")]  # relay dir removed

    p = fresh(cluster, "node2", "bash", stage, store)  # nothing changed: nothing read, nothing copied
    assert p.returncode == 0 and "(0 copied, 4 unchanged)" in p.stdout, p.stdout + p.stderr
    assert shared_read(p.stdout) == 0.0

    # node3 (host 2, a leaf of node1) cannot hold a copy: named; with --min-fraction the stage succeeds
    (venv / "blob.bin").write_bytes(os.urandom(8 << 20))
    (to / "node3").mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(to / "node3")], check=True)
    try:
        p = fresh(cluster, "node1", "bash", stage, store)
        assert p.returncode == 1 and p.stderr.startswith("jobenv: error: node3: no space in "), p.stderr
        assert "3/4 hosts verified (3 copied, 0 unchanged)" in p.stdout and shared_read(p.stdout) == 1.0, p.stdout
        assert not list(Path(store).glob("runs/*/bad-hosts.json"))  # a failed stage retires nobody
        (venv / "blob.bin").write_bytes(os.urandom((8 << 20) + 1))  # changed again (another size)
        p = fresh(cluster, "node1", "bash", stage + " --min-fraction 0.75", store)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "3/4 hosts verified (3 copied, 0 unchanged)" in p.stdout and shared_read(p.stdout) == 1.0, p.stdout
        assert p.stderr.startswith("jobenv: warning: node3: no space in "), p.stderr
        assert "host(s) left out of later launches" in p.stderr and p.stderr.rstrip().endswith(": node3"), p.stderr
    finally:
        subprocess.run(["umount", str(to / "node3")], check=True)
    ledger = next(Path(store).glob("runs/*/bad-hosts.json"))
    assert [e["host"] for e in json.loads(ledger.read_text())["retired"]] == ["node3"]
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch -- hostname", store)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(line for line in p.stdout.split() if line.startswith("node")) == ["node1", "node2", "node4"], p.stdout
    assert "leaving out node3: stage failed" in p.stdout + p.stderr
